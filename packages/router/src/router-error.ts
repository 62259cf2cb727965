import { CodedError, type CodedErrorOptions, type ErrorCode } from '@conch/protocol'

/** What a router error carries besides its code and message (the protocol's `CodedErrorOptions`). */
export type RouterErrorOptions<C extends ErrorCode> = CodedErrorOptions<C>

/** The router's one error class: a protocol `code` (which fixes the HTTP status), a message and facts. */
export class RouterError<C extends ErrorCode = ErrorCode> extends CodedError<C> {
  /** Creates an error with a code, a message that says what happened, and optional details and cause. */
  constructor(code: C, message: string, options: RouterErrorOptions<C> = {}) {
    super(code, message, options)
    this.name = 'RouterError'
  }
}

/**
 * Any error a request ends with, as a RouterError: a body fastify could not read gets its own
 * code, and anything unexpected is INTERNAL (the original kept as its cause for the log).
 */
export function toRouterError(error: unknown): RouterError {
  if (error instanceof RouterError) return error
  const code = (error as { code?: unknown }).code
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new RouterError(
      'FRAME_TOO_LARGE',
      'the request body is larger than the router forwards; send a smaller body',
    )
  }
  if (typeof code === 'string' && code.startsWith('FST_ERR_CTP')) {
    return new RouterError(
      'BAD_REQUEST',
      'the request body could not be read; send a complete body with a correct length',
    )
  }
  return new RouterError('INTERNAL', 'the router hit an unexpected error; see its log', { cause: error })
}
