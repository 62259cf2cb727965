import { assertNever } from '@conch/protocol'
import {
  AuthError,
  ConchError,
  type ConchErrorOptions,
  ConnectionError,
  DeadlineError,
  OutputLostError,
  RateLimitError,
  SandboxNotFoundError,
  SessionNotFoundError,
  ShellClosedError,
} from './conch-error.ts'
import { isErrorCode } from './error-code.ts'

/** An error as the runner reports it, before the SDK knows whether its code is known. */
export interface RawWireError {
  /** The code as sent; may be newer than this SDK. */
  code: string
  /** The runner's message. */
  message: string
  /** Extra facts. */
  details?: Record<string, unknown> | undefined
}

/**
 * Turns an error from the runner (REST body or error frame) into the SDK class for its code.
 * This switch is the one place that maps codes to classes. A code this SDK does not know
 * becomes a plain `ConchError` with code `INTERNAL`, keeping the original in `details.code`.
 */
export function errorFromWire(
  wire: RawWireError,
  options: Omit<ConchErrorOptions, 'details'> = {},
): ConchError {
  const opts: ConchErrorOptions = { ...options, details: wire.details ?? {} }
  const message = wire.message
  if (!isErrorCode(wire.code)) {
    return new ConchError('INTERNAL', `${message} (runner error code ${wire.code}; upgrade @conch/sdk)`, {
      ...opts,
      details: { ...opts.details, code: wire.code },
    })
  }
  const code = wire.code
  switch (code) {
    case 'SHELL_CLOSED': {
      const d = opts.details ?? {}
      const exitCode = typeof d.code === 'number' ? d.code : null
      const signal = typeof d.signal === 'string' ? d.signal : null
      return new ShellClosedError(`${message}; open a new shell to continue`, { exitCode, signal }, opts)
    }
    case 'SANDBOX_NOT_FOUND':
      return new SandboxNotFoundError(`${message}; list live sandboxes with Sandbox.list()`, opts)
    case 'SESSION_NOT_FOUND':
      return new SessionNotFoundError(`${message}; list live sessions with sb.listSessions()`, opts)
    case 'UNAUTHORIZED':
    case 'FORBIDDEN':
      return new AuthError(code, `${message}; check the API key or mint a new token for this sandbox`, opts)
    case 'RATE_LIMITED':
    case 'TOO_MANY_SANDBOXES':
    case 'TOO_MANY_SESSIONS':
    case 'TOO_MANY_PROCESSES':
      return new RateLimitError(code, `${message}; wait for queued work to finish or free some`, opts)
    case 'OUTPUT_LOST':
      return new OutputLostError(`${message}; run the command again to get its full output`, opts)
    case 'CONNECTION_LOST':
    case 'AGENT_UNAVAILABLE':
    case 'RUNNER_UNAVAILABLE':
      return new ConnectionError(message, { ...opts, code })
    case 'DEADLINE_EXCEEDED':
      return new DeadlineError(message, opts)
    case 'BAD_REQUEST':
    case 'LIMITS_NOT_ENFORCEABLE':
    case 'SSH_HOST_UNKNOWN':
    case 'SSH_HOST_KEY_REJECTED':
    case 'INVALID_FRAME':
    case 'UNKNOWN_FRAME_TYPE':
    case 'FRAME_TOO_LARGE':
    case 'COMMAND_TOO_LARGE':
    case 'INVALID_COMMAND':
    case 'UNSUPPORTED_PROTOCOL_VERSION':
    case 'NOT_FOUND':
    case 'PROCESS_NOT_FOUND':
    case 'FILE_NOT_FOUND':
    case 'HISTORY_NOT_FOUND':
    case 'SESSION_EXISTS':
    case 'SESSION_PROTECTED':
    case 'SANDBOX_NOT_RUNNING':
    case 'PATH_OUTSIDE_SANDBOX':
    case 'NOT_A_DIRECTORY':
    case 'IS_A_DIRECTORY':
    case 'FILE_EXISTS':
    case 'DIRECTORY_NOT_EMPTY':
    case 'INTERNAL':
      return new ConchError(code, message, opts)
    default:
      return assertNever(code)
  }
}
