import { ERROR_STATUS, type ErrorBody, type ErrorCode, type WireError } from '@conch/protocol'

/** The router's one error class: a protocol `code` (which fixes the HTTP status), a message and facts. */
export class RouterError extends Error {
  /** Machine-readable code from the protocol's registry. */
  readonly code: ErrorCode
  /** Extra facts for the caller (which shard, say). */
  readonly details: Record<string, unknown> | undefined

  /** Creates an error with a code, a message that says what to do, and optional details and cause. */
  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: Record<string, unknown> | undefined; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause })
    this.name = 'RouterError'
    this.code = code
    this.details = options.details
  }

  /** The HTTP status of this error's code. */
  get status(): number {
    return ERROR_STATUS[this.code]
  }

  /** The error as it travels inside bodies. */
  toWire(): WireError {
    return this.details
      ? { code: this.code, message: this.message, details: this.details }
      : { code: this.code, message: this.message }
  }

  /** The REST body for this error. */
  toBody(): ErrorBody {
    return { error: this.toWire() }
  }
}
