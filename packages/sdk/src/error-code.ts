import type { ErrorCode as ProtocolErrorCode } from '@conch/protocol'

// Every protocol error code, as a plain object so the SDK recognises codes without the
// protocol's zod schemas. `SameCodes` below fails typecheck when the two lists drift.

const ERROR_CODES = {
  BAD_REQUEST: true,
  INVALID_FRAME: true,
  UNKNOWN_FRAME_TYPE: true,
  FRAME_TOO_LARGE: true,
  COMMAND_TOO_LARGE: true,
  INVALID_COMMAND: true,
  UNSUPPORTED_PROTOCOL_VERSION: true,
  UNAUTHORIZED: true,
  FORBIDDEN: true,
  NOT_FOUND: true,
  SANDBOX_NOT_FOUND: true,
  SESSION_NOT_FOUND: true,
  PROCESS_NOT_FOUND: true,
  FILE_NOT_FOUND: true,
  HISTORY_NOT_FOUND: true,
  SESSION_EXISTS: true,
  SESSION_PROTECTED: true,
  SHELL_CLOSED: true,
  SANDBOX_NOT_RUNNING: true,
  PATH_OUTSIDE_SANDBOX: true,
  NOT_A_DIRECTORY: true,
  IS_A_DIRECTORY: true,
  FILE_EXISTS: true,
  DIRECTORY_NOT_EMPTY: true,
  OUTPUT_LOST: true,
  LIMITS_NOT_ENFORCEABLE: true,
  TOO_MANY_SANDBOXES: true,
  TOO_MANY_SESSIONS: true,
  TOO_MANY_PROCESSES: true,
  RATE_LIMITED: true,
  DEADLINE_EXCEEDED: true,
  AGENT_UNAVAILABLE: true,
  SSH_HOST_UNKNOWN: true,
  SSH_HOST_KEY_REJECTED: true,
  RUNNER_UNAVAILABLE: true,
  CONNECTION_LOST: true,
  INTERNAL: true,
} as const

/**
 * A machine-readable error code from the conch protocol; every `ConchError` has one.
 *
 * @example
 * ```ts
 * const code: ErrorCode = 'SESSION_NOT_FOUND'
 * ```
 */
export type ErrorCode = keyof typeof ERROR_CODES

type SameCodes = [ErrorCode] extends [ProtocolErrorCode]
  ? [ProtocolErrorCode] extends [ErrorCode]
    ? true
    : false
  : false
const sameCodes: SameCodes = true
void sameCodes

/** True when `code` is one this SDK knows. */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code)
}
