import {
  boundedErrorDetails,
  CodedError,
  type CodedErrorOptions,
  type ErrorCode,
  type WireError,
} from '@conch/protocol'

/** What a runner error carries besides its code and message (the protocol's `CodedErrorOptions`). */
export type RunnerErrorOptions<C extends ErrorCode> = CodedErrorOptions<C>

/** The runner's one error class: a protocol `code` (which fixes the HTTP status), a message and typed facts. */
export class RunnerError<C extends ErrorCode = ErrorCode> extends CodedError<C> {
  /** Creates an error with a code, a message that says what happened, and optional details and cause. */
  constructor(code: C, message: string, options: RunnerErrorOptions<C> = {}) {
    super(code, message, options)
    this.name = 'RunnerError'
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
