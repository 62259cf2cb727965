import type { ErrorCode, ShellClosedInfo, WireError } from '@conch/protocol'

/** The agent's base error: a protocol error code, a message that says what to do, and details. */
export class AgentError extends Error {
  /** Machine-readable code from the protocol's registry. */
  readonly code: ErrorCode
  /** Extra facts for the caller, such as `earliestOffset`. */
  readonly details: Record<string, unknown> | undefined

  /** Creates an error with a code, a message and optional details and cause. */
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options)
    this.name = 'AgentError'
    this.code = code
    this.details = details
  }

  /** The error as it goes on the wire. */
  toWire(): WireError {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details }
  }
}

/** A run failed because its shell closed (bash exited or was killed). */
export class ShellClosedError extends AgentError {
  /** How the shell closed. */
  readonly info: ShellClosedInfo

  /** Creates the error for session `sessionId` closed as `info`. */
  constructor(sessionId: string, info: ShellClosedInfo) {
    super(
      'SHELL_CLOSED',
      `the shell of session "${sessionId}" closed (${info.reason}); create a new session to keep working.`,
      { sessionId, code: info.code, signal: info.signal, reason: info.reason },
    )
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
