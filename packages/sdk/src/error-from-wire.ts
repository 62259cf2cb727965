import { assertNever } from '@conch/protocol'
import { check, type Shape, shapeOf } from '@conch/protocol/json-shape'
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
import { type ErrorCode, isErrorCode } from './error-code.ts'
import type { ErrorDetails } from './error-details.ts'
import { ERROR_DETAILS_SCHEMAS } from './wire-schemas.ts'

/** An error as the runner reports it, before the SDK knows whether its code is known. */
export interface RawWireError {
  /** The code as sent; may be newer than this SDK. */
  code: string
  /** The runner's message. */
  message: string
  /** Extra facts, not yet checked against the code's schema. */
  details?: Record<string, unknown> | undefined
}

/** `details` checked against `code`'s schema: unknown keys dropped, and `{}` when they do not match. */
function detailsOf<C extends ErrorCode>(code: C, details: unknown): Partial<ErrorDetails[C]> {
  const schema = ERROR_DETAILS_SCHEMAS[code]
  const shape: Shape<Partial<ErrorDetails[C]>> | undefined = schema && shapeOf(schema)
  return (details === undefined || !shape ? undefined : check(shape, details)) ?? {}
}

/**
 * Turns an error from the runner (REST body or error frame) into the SDK class for its code,
 * with its details checked against the code's schema. This switch is the one place that maps
 * codes to classes; the class adds the code's suggestion. A code this SDK does not know becomes
 * a plain `ConchError` with code `INTERNAL`, keeping the original in `details.code`.
 */
export function errorFromWire(
  wire: RawWireError,
  options: Omit<ConchErrorOptions, 'details'> = {},
): ConchError {
  const message = wire.message
  if (!isErrorCode(wire.code)) {
    return new ConchError('INTERNAL', `${message} (runner error code ${wire.code}; upgrade @conch/sdk)`, {
      ...options,
      details: { code: wire.code },
    })
  }
  const code = wire.code
  const opts = <K extends ErrorCode>(k: K) => ({ ...options, details: detailsOf(k, wire.details) })
  switch (code) {
    case 'SHELL_CLOSED': {
      const o = opts(code)
      return new ShellClosedError(
        message,
        { exitCode: o.details.code ?? null, signal: o.details.signal ?? null },
        o,
      )
    }
    case 'SANDBOX_NOT_FOUND':
      return new SandboxNotFoundError(message, opts(code))
    case 'SESSION_NOT_FOUND':
      return new SessionNotFoundError(message, opts(code))
    case 'UNAUTHORIZED':
    case 'FORBIDDEN':
      return new AuthError(code, message, opts(code))
    case 'RATE_LIMITED':
    case 'TOO_MANY_SANDBOXES':
    case 'TOO_MANY_SESSIONS':
    case 'TOO_MANY_PROCESSES':
    case 'TOO_MANY_TERMINALS':
    case 'TOO_MANY_EXPOSED_PORTS':
    case 'TOO_MANY_CONNECTIONS':
      return new RateLimitError(code, message, opts(code))
    case 'OUTPUT_LOST':
      return new OutputLostError(message, opts(code))
    case 'CONNECTION_LOST':
    case 'AGENT_UNAVAILABLE':
    case 'RUNNER_UNAVAILABLE':
      return new ConnectionError(message, { ...opts(code), code })
    case 'DEADLINE_EXCEEDED':
      return new DeadlineError(message, opts(code))
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
    case 'SNAPSHOT_NOT_FOUND':
    case 'SNAPSHOT_TOO_LARGE':
    case 'SNAPSHOT_INCOMPATIBLE':
    case 'TOO_MANY_SNAPSHOTS':
    case 'SESSION_EXISTS':
    case 'SESSION_PROTECTED':
    case 'SESSION_BUSY':
    case 'SANDBOX_NOT_RUNNING':
    case 'PATH_OUTSIDE_SANDBOX':
    case 'NOT_A_DIRECTORY':
    case 'IS_A_DIRECTORY':
    case 'FILE_EXISTS':
    case 'DIRECTORY_NOT_EMPTY':
    case 'PORT_NOT_LISTENING':
    case 'TERMINAL_NOT_FOUND':
    case 'INTERNAL':
      return new ConchError(code, message, opts(code))
    default:
      return assertNever(code)
  }
}
