import {
  boundedErrorDetails,
  ERROR_STATUS,
  type ErrorBody,
  type ErrorCode,
  type ErrorDetails,
  type WireError,
} from '@conch/protocol'

/** What an error carries besides its code and message; the same shape in the agent, router and SDK. */
export interface RunnerErrorOptions<C extends ErrorCode> {
  /** Facts for the caller, typed by the code (`earliestOffset` for OUTPUT_LOST). */
  details?: ErrorDetails[C] | undefined
  /** The error that caused this one (ES2022 `cause`). */
  cause?: unknown
}

/** The runner's one error class: a protocol `code` (which fixes the HTTP status), a message and typed facts. */
export class RunnerError<C extends ErrorCode = ErrorCode> extends Error {
  /** Machine-readable code from the protocol's registry. */
  readonly code: C
  /** Facts for the caller, checked against the code's schema (dropped when they do not match). */
  readonly details: ErrorDetails[C] | undefined

  /** Creates an error with a code, a message that says what happened, and optional details and cause. */
  constructor(code: C, message: string, options: RunnerErrorOptions<C> = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'RunnerError'
    this.code = code
    this.details = boundedErrorDetails(code, options.details)
  }

  /** The HTTP status of this error's code. */
  get status(): number {
    return ERROR_STATUS[this.code]
  }

  /** The error as it travels inside frames and bodies. */
  toWire(): WireError {
    return this.details
      ? { code: this.code, message: this.message, details: this.details }
      : { code: this.code, message: this.message }
  }

  /** The REST body for this error. */
  toBody(): ErrorBody {
    return { error: this.toWire() }
  }

  /** Rebuilds an error that arrived on the wire from an agent (bounded by `AgentWireError` as it was parsed). */
  static fromWire(error: WireError): RunnerError {
    return new RunnerError(error.code, error.message, {
      details: boundedErrorDetails(error.code, error.details),
    })
  }
}

/** Turns anything thrown into a RunnerError; unknown failures become INTERNAL without leaking their text. */
export function toRunnerError(error: unknown): RunnerError {
  if (error instanceof RunnerError) return error
  return new RunnerError('INTERNAL', 'the runner hit an unexpected error; see its log', { cause: error })
}
