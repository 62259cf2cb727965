import { boundedErrorDetails } from './bounded-error-details.ts'
import type { ErrorBody, ErrorCode, WireError } from './error-codes.ts'
import type { ErrorDetails } from './error-details.ts'
import { ERROR_STATUS } from './error-status.ts'

// The error class every server-side process builds on (the agent's, the runner's and the
// router's): a protocol code, a message that says what happened, and details typed by the code
// and checked against its schema as the error is made. The SDK's `ConchError` takes the same
// constructor shape without this class, so its published types need no zod.

/** What an error carries besides its code and message. */
export interface CodedErrorOptions<C extends ErrorCode> {
  /** Facts for the caller, typed by the code (`earliestOffset` for OUTPUT_LOST). */
  details?: ErrorDetails[C] | undefined
  /** The error that caused this one (ES2022 `cause`). */
  cause?: unknown
}

/** A protocol error: `code` fixes the HTTP status and the suggestion the SDK adds. */
export class CodedError<C extends ErrorCode = ErrorCode> extends Error {
  /** Machine-readable code from the protocol's registry. */
  readonly code: C
  /** Facts for the caller, checked against the code's schema (dropped when they do not match). */
  readonly details: ErrorDetails[C] | undefined

  /** Creates an error with a code, a message that says what happened, and optional details and cause. */
  constructor(code: C, message: string, options: CodedErrorOptions<C> = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'CodedError'
    this.code = code
    this.details = boundedErrorDetails(code, options.details)
  }

  /** The HTTP status of this error's code. */
  get status(): number {
    return ERROR_STATUS[this.code]
  }

  /** The error as it travels inside frames and bodies. */
  toWire(): WireError {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details }
  }

  /** The REST body for this error. */
  toBody(): ErrorBody {
    return { error: this.toWire() }
  }
}
