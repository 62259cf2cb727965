import {
  boundedErrorDetails,
  type ErrorCode,
  type ErrorDetails,
  type ShellClosedInfo,
  type WireError,
} from '@conch/protocol'

/** What an error carries besides its code and message; the same shape in the runner, router and SDK. */
export interface AgentErrorOptions<C extends ErrorCode> {
  /** Facts for the caller, typed by the code (`earliestOffset` for OUTPUT_LOST). */
  details?: ErrorDetails[C] | undefined
  /** The error that caused this one (ES2022 `cause`). */
  cause?: unknown
}

/** The agent's base error: a protocol error code, a message that says what happened, and typed details. */
export class AgentError<C extends ErrorCode = ErrorCode> extends Error {
  /** Machine-readable code from the protocol's registry. */
  readonly code: C
  /** Facts for the caller, checked against the code's schema (dropped when they do not match). */
  readonly details: ErrorDetails[C] | undefined

  /** Creates an error with a code, a message, and optional details and cause. */
  constructor(code: C, message: string, options: AgentErrorOptions<C> = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'AgentError'
    this.code = code
    this.details = boundedErrorDetails(code, options.details)
  }

  /** The error as it goes on the wire. */
  toWire(): WireError {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details }
  }
}

/** A run failed because its shell closed (bash exited or was killed). */
export class ShellClosedError extends AgentError<'SHELL_CLOSED'> {
  /** How the shell closed. */
  readonly info: ShellClosedInfo

  /** Creates the error for session `sessionId` closed as `info`. */
  constructor(sessionId: string, info: ShellClosedInfo) {
    super('SHELL_CLOSED', `the shell of session "${sessionId}" closed (${info.reason})`, {
      details: { sessionId, code: info.code, signal: info.signal, reason: info.reason },
    })
    this.name = 'ShellClosedError'
    this.info = info
  }
}

/** Turns anything thrown into a wire error; unknown errors become INTERNAL. */
export function toWireError(err: unknown): WireError {
  if (err instanceof AgentError) return err.toWire()
  const message = err instanceof Error ? err.message : String(err)
  return { code: 'INTERNAL', message: `internal agent error: ${message}` }
}
