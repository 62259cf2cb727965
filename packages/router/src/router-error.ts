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
