import { z } from 'zod'

/** Every error code that crosses a process boundary. Each one has an HTTP status and a docs anchor. */
export const ErrorCode = z.enum([
  'BAD_REQUEST',
  'INVALID_FRAME',
  'UNKNOWN_FRAME_TYPE',
  'FRAME_TOO_LARGE',
  'COMMAND_TOO_LARGE',
  'INVALID_COMMAND',
  'UNSUPPORTED_PROTOCOL_VERSION',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'NOT_FOUND',
  'SANDBOX_NOT_FOUND',
  'SESSION_NOT_FOUND',
  'PROCESS_NOT_FOUND',
  'FILE_NOT_FOUND',
  'HISTORY_NOT_FOUND',
  'SNAPSHOT_NOT_FOUND',
  'SNAPSHOT_TOO_LARGE',
  'SNAPSHOT_INCOMPATIBLE',
  'TOO_MANY_SNAPSHOTS',
  'TERMINAL_NOT_FOUND',
  'SESSION_EXISTS',
  'SESSION_PROTECTED',
  'SESSION_BUSY',
  'SHELL_CLOSED',
  'SANDBOX_NOT_RUNNING',
  'PATH_OUTSIDE_SANDBOX',
  'NOT_A_DIRECTORY',
  'IS_A_DIRECTORY',
  'FILE_EXISTS',
  'DIRECTORY_NOT_EMPTY',
  'OUTPUT_LOST',
  'LIMITS_NOT_ENFORCEABLE',
  'TOO_MANY_SANDBOXES',
  'TOO_MANY_SESSIONS',
  'TOO_MANY_PROCESSES',
  'TOO_MANY_TERMINALS',
  'TOO_MANY_EXPOSED_PORTS',
  'TOO_MANY_CONNECTIONS',
  'RATE_LIMITED',
  'DEADLINE_EXCEEDED',
  'AGENT_UNAVAILABLE',
  'SSH_HOST_UNKNOWN',
  'SSH_HOST_KEY_REJECTED',
  'RUNNER_UNAVAILABLE',
  'PORT_NOT_LISTENING',
  'CONNECTION_LOST',
  'INTERNAL',
])
/** One error code. */
export type ErrorCode = z.infer<typeof ErrorCode>

/** What an error looks like on the wire, inside frames and REST bodies. */
export const WireError = z.object({
  /** Machine-readable code; callers branch on this. */
  code: ErrorCode,
  /** What happened and what to do, with the ids involved. */
  message: z.string(),
  /** Extra facts for the caller, such as `earliestOffset` for OUTPUT_LOST. */
  details: z.record(z.string(), z.unknown()).optional(),
})
/** An error on the wire. */
export type WireError = z.infer<typeof WireError>

/** The body of every non-2xx REST response. */
export const ErrorBody = z.object({
  /** The error. */
  error: WireError,
})
/** A REST error body. */
export type ErrorBody = z.infer<typeof ErrorBody>
