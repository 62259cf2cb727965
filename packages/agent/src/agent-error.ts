import type { CodedErrorOptions, ErrorCode, ShellClosedInfo, WireError } from '@conch/protocol'
import { CodedError } from '@conch/protocol/zod-free'

/** What an agent error carries besides its code and message (the protocol's `CodedErrorOptions`). */
export type AgentErrorOptions<C extends ErrorCode> = CodedErrorOptions<C>

/** The agent's base error: a protocol error code, a message that says what happened, and typed details. */
export class AgentError<C extends ErrorCode = ErrorCode> extends CodedError<C> {
  /** Creates an error with a code, a message, and optional details and cause. */
  constructor(code: C, message: string, options: AgentErrorOptions<C> = {}) {
    super(code, message, options)
    this.name = 'AgentError'
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
