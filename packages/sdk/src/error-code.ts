import { ERROR_SUGGESTIONS, type ErrorCode as ProtocolErrorCode } from '@conch/protocol'

// Every protocol error code, spelt out so the published `.d.ts` needs no zod. `SameCodes`
// below fails typecheck when this list and the protocol's drift; at runtime a code is known
// when the protocol's suggestion map (bundled anyway) has it.

/**
 * A machine-readable error code from the conch protocol; every `ConchError` has one.
 *
 * @example
 * ```ts
 * const code: ErrorCode = 'SESSION_NOT_FOUND'
 * ```
 */
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'INVALID_FRAME'
  | 'UNKNOWN_FRAME_TYPE'
  | 'FRAME_TOO_LARGE'
  | 'COMMAND_TOO_LARGE'
  | 'INVALID_COMMAND'
  | 'UNSUPPORTED_PROTOCOL_VERSION'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'SANDBOX_NOT_FOUND'
  | 'SESSION_NOT_FOUND'
  | 'PROCESS_NOT_FOUND'
  | 'FILE_NOT_FOUND'
  | 'HISTORY_NOT_FOUND'
  | 'TERMINAL_NOT_FOUND'
  | 'SNAPSHOT_NOT_FOUND'
  | 'SNAPSHOT_TOO_LARGE'
  | 'SNAPSHOT_INCOMPATIBLE'
  | 'TOO_MANY_SNAPSHOTS'
  | 'SESSION_EXISTS'
  | 'SESSION_PROTECTED'
  | 'SESSION_BUSY'
  | 'SHELL_CLOSED'
  | 'SANDBOX_NOT_RUNNING'
  | 'PATH_OUTSIDE_SANDBOX'
  | 'NOT_A_DIRECTORY'
  | 'IS_A_DIRECTORY'
  | 'FILE_EXISTS'
  | 'DIRECTORY_NOT_EMPTY'
  | 'OUTPUT_LOST'
  | 'LIMITS_NOT_ENFORCEABLE'
  | 'TOO_MANY_SANDBOXES'
  | 'TOO_MANY_SESSIONS'
  | 'TOO_MANY_PROCESSES'
  | 'TOO_MANY_TERMINALS'
  | 'TOO_MANY_EXPOSED_PORTS'
  | 'TOO_MANY_CONNECTIONS'
  | 'RATE_LIMITED'
  | 'DEADLINE_EXCEEDED'
  | 'AGENT_UNAVAILABLE'
  | 'RUNNER_UNAVAILABLE'
  | 'CONNECTION_LOST'
  | 'PORT_NOT_LISTENING'
  | 'SSH_HOST_UNKNOWN'
  | 'SSH_HOST_KEY_REJECTED'
  | 'INTERNAL'

type SameCodes = [ErrorCode] extends [ProtocolErrorCode]
  ? [ProtocolErrorCode] extends [ErrorCode]
    ? true
    : false
  : false
const sameCodes: SameCodes = true
void sameCodes

/** True when `code` is one this SDK knows. */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_SUGGESTIONS, code)
}
