import { z } from 'zod'
import type { ErrorCode } from './error-codes.ts'
import { Offset, SessionId, Timestamp } from './primitives.ts'

// The typed `details` of every error code: what a thrower puts besides its message, so a
// caller branches on facts instead of parsing text. Codes that carry no facts have an empty
// object. Every string and list is bounded, and `boundedErrorDetails` drops details that do not
// match their code's schema or serialize past `MAX_ERROR_DETAILS_BYTES`, so a forwarder (the
// runner, for an agent's errors) never passes on more than the schema admits.

const Text = z.string().max(1024)
const Path = Text

/** A limit that was hit: the limit and the value that reached it. */
export const LimitDetails = z.object({
  /** The configured limit. */
  limit: z.number().int().nonnegative(),
  /** The value that reached or passed it (a count or a size in bytes). */
  value: z.number().int().nonnegative(),
})
/** A limit that was hit. */
export type LimitDetails = z.infer<typeof LimitDetails>

/** The path an error is about. */
export const PathDetails = z.object({
  /** The path as the caller gave it, cut to 200 characters. */
  path: Path,
})
/** The path an error is about. */
export type PathDetails = z.infer<typeof PathDetails>

/** The session an error is about. */
export const SessionDetails = z.object({
  /** The session's id. */
  sessionId: SessionId,
})
/** The session an error is about. */
export type SessionDetails = z.infer<typeof SessionDetails>

/** A snapshot limit that was hit: the limit, and the value that reached it when it is known. */
export const SnapshotLimitDetails = z.object({
  /** The configured limit. */
  limit: z.number().int().nonnegative(),
  /** The value that reached or passed it, when the runner counted it. */
  value: z.number().int().nonnegative().optional(),
})
/** A snapshot limit that was hit. */
export type SnapshotLimitDetails = z.infer<typeof SnapshotLimitDetails>

/** SNAPSHOT_NOT_FOUND: the id asked for, cut to 64 characters. */
export const SnapshotNotFoundDetails = z.object({ snapshotId: z.string().max(64) })
/** SNAPSHOT_NOT_FOUND details. */
export type SnapshotNotFoundDetails = z.infer<typeof SnapshotNotFoundDetails>

/** SNAPSHOT_INCOMPATIBLE: the format version the snapshot declares, or null when it has none. */
export const SnapshotIncompatibleDetails = z.object({ formatVersion: z.number().int().nullable() })
/** SNAPSHOT_INCOMPATIBLE details. */
export type SnapshotIncompatibleDetails = z.infer<typeof SnapshotIncompatibleDetails>

/** PORT_NOT_LISTENING: the sandbox port nothing listens on. */
export const PortDetails = z.object({ port: z.number().int().min(1).max(65_535) })
/** PORT_NOT_LISTENING details. */
export type PortDetails = z.infer<typeof PortDetails>

/** No facts beyond the message. */
export const NoDetails = z.object({})
/** No facts beyond the message. */
export type NoDetails = z.infer<typeof NoDetails>

/** BAD_REQUEST: the fields that failed, the path or offsets involved, or the allowed values. */
export const BadRequestDetails = z.object({
  /** Up to five schema issues, each with the field path and what was expected. */
  issues: z
    .array(z.object({ path: z.array(Text).max(16), message: Text }))
    .max(5)
    .optional(),
  /** The path the request named. */
  path: Path.optional(),
  /** The values the field allows (for example the runner's drivers). */
  allowed: z.array(Text).max(32).optional(),
  /** The offset asked for, when it was past the end of the log. */
  requestedOffset: Offset.optional(),
  /** The end of the log. */
  endOffset: Offset.optional(),
})
/** BAD_REQUEST details. */
export type BadRequestDetails = z.infer<typeof BadRequestDetails>

/** FRAME_TOO_LARGE: the limit in bytes and the size of what was sent, when known. */
export const FrameTooLargeDetails = LimitDetails.partial()
/** FRAME_TOO_LARGE details. */
export type FrameTooLargeDetails = z.infer<typeof FrameTooLargeDetails>

/** FORBIDDEN: the path, when a file operation was refused. */
export const ForbiddenDetails = PathDetails.partial()
/** FORBIDDEN details. */
export type ForbiddenDetails = z.infer<typeof ForbiddenDetails>

/** SANDBOX_NOT_FOUND: the id that names no sandbox, when a router reports it. */
export const SandboxNotFoundDetails = z.object({
  /** The sandbox id asked for. */
  sandboxId: Text.optional(),
})
/** SANDBOX_NOT_FOUND details. */
export type SandboxNotFoundDetails = z.infer<typeof SandboxNotFoundDetails>

/** PROCESS_NOT_FOUND: the process id that names no process. */
export const ProcessNotFoundDetails = z.object({
  /** The process id asked for, cut to 80 characters. */
  processId: Text,
})
/** PROCESS_NOT_FOUND details. */
export type ProcessNotFoundDetails = z.infer<typeof ProcessNotFoundDetails>

/** SHELL_CLOSED: which session's shell closed and how, as in `shell_closed`. */
export const ShellClosedDetails = z.object({
  /** The session whose shell closed. */
  sessionId: SessionId,
  /** bash's exit status, when it exited. */
  code: z.number().int().nullable(),
  /** The signal that killed bash, when one did. */
  signal: Text.nullable(),
  /** Why it closed, for people. */
  reason: Text,
})
/** SHELL_CLOSED details. */
export type ShellClosedDetails = z.infer<typeof ShellClosedDetails>

/** OUTPUT_LOST: the oldest offset still held, and the one asked for. */
export const OutputLostDetails = z.object({
  /** The oldest log offset still in the scrollback; reattach from here if a gap is acceptable. */
  earliestOffset: Offset,
  /** The offset the client asked to resume from. */
  requestedOffset: Offset.optional(),
})
/** OUTPUT_LOST details. */
export type OutputLostDetails = z.infer<typeof OutputLostDetails>

/** AGENT_UNAVAILABLE: the sandbox's state and why its agent does not answer, when known. */
export const AgentUnavailableDetails = z.object({
  /** The sandbox's status. */
  status: z.enum(['starting', 'running', 'unreachable', 'dead', 'destroyed']).optional(),
  /** Why the agent does not answer. */
  reason: Text.nullable().optional(),
})
/** AGENT_UNAVAILABLE details. */
export type AgentUnavailableDetails = z.infer<typeof AgentUnavailableDetails>

/** RUNNER_UNAVAILABLE: the shards a router could not reach. */
export const RunnerUnavailableDetails = z.object({
  /** The runner shard holding the sandbox, when one shard failed. */
  shard: Text.optional(),
  /** Every shard that failed, when the request needed several. */
  shards: z.array(Text).max(256).optional(),
})
/** RUNNER_UNAVAILABLE details. */
export type RunnerUnavailableDetails = z.infer<typeof RunnerUnavailableDetails>

/** CONNECTION_LOST: how the socket closed, when it did. */
export const ConnectionLostDetails = z.object({
  /** The WebSocket close code. */
  closeCode: z.number().int().optional(),
  /** The WebSocket close reason. */
  closeReason: Text.optional(),
})
/** CONNECTION_LOST details. */
export type ConnectionLostDetails = z.infer<typeof ConnectionLostDetails>

/** UNAUTHORIZED: when the token expired, for a socket closed by its token's expiry. */
export const UnauthorizedDetails = z.object({
  /** When the token expired. */
  expiredAt: Timestamp.optional(),
})
/** UNAUTHORIZED details. */
export type UnauthorizedDetails = z.infer<typeof UnauthorizedDetails>

/** INTERNAL: the code a newer runner sent that this client does not know. */
export const InternalDetails = z.object({
  /** The unknown code as received. */
  code: Text.optional(),
})
/** INTERNAL details. */
export type InternalDetails = z.infer<typeof InternalDetails>

/** The details schema of every code; a code without one fails typecheck. */
export const ERROR_DETAILS = {
  BAD_REQUEST: BadRequestDetails,
  INVALID_FRAME: NoDetails,
  UNKNOWN_FRAME_TYPE: NoDetails,
  FRAME_TOO_LARGE: FrameTooLargeDetails,
  COMMAND_TOO_LARGE: LimitDetails,
  INVALID_COMMAND: NoDetails,
  UNSUPPORTED_PROTOCOL_VERSION: NoDetails,
  UNAUTHORIZED: UnauthorizedDetails,
  FORBIDDEN: ForbiddenDetails,
  NOT_FOUND: NoDetails,
  SANDBOX_NOT_FOUND: SandboxNotFoundDetails,
  SESSION_NOT_FOUND: SessionDetails,
  PROCESS_NOT_FOUND: ProcessNotFoundDetails,
  FILE_NOT_FOUND: PathDetails,
  HISTORY_NOT_FOUND: NoDetails,
  SNAPSHOT_NOT_FOUND: SnapshotNotFoundDetails,
  SNAPSHOT_TOO_LARGE: SnapshotLimitDetails,
  SNAPSHOT_INCOMPATIBLE: SnapshotIncompatibleDetails,
  TOO_MANY_SNAPSHOTS: SnapshotLimitDetails,
  SESSION_BUSY: SessionDetails,
  PORT_NOT_LISTENING: PortDetails.partial(),
  TERMINAL_NOT_FOUND: z.object({ terminal: z.string().max(64) }).partial(),
  TOO_MANY_TERMINALS: LimitDetails.partial(),
  TOO_MANY_EXPOSED_PORTS: LimitDetails,
  TOO_MANY_CONNECTIONS: LimitDetails,
  SSH_HOST_UNKNOWN: z
    .object({ host: z.string().max(64), hosts: z.array(z.string().max(64)).max(64) })
    .partial(),
  SSH_HOST_KEY_REJECTED: z.object({ host: z.string().max(64) }).partial(),
  SESSION_EXISTS: SessionDetails,
  SESSION_PROTECTED: SessionDetails,
  SHELL_CLOSED: ShellClosedDetails,
  SANDBOX_NOT_RUNNING: AgentUnavailableDetails,
  PATH_OUTSIDE_SANDBOX: PathDetails,
  NOT_A_DIRECTORY: PathDetails,
  IS_A_DIRECTORY: PathDetails,
  FILE_EXISTS: PathDetails,
  DIRECTORY_NOT_EMPTY: PathDetails,
  OUTPUT_LOST: OutputLostDetails,
  LIMITS_NOT_ENFORCEABLE: NoDetails,
  TOO_MANY_SANDBOXES: LimitDetails,
  TOO_MANY_SESSIONS: LimitDetails,
  TOO_MANY_PROCESSES: LimitDetails,
  RATE_LIMITED: LimitDetails,
  DEADLINE_EXCEEDED: NoDetails,
  AGENT_UNAVAILABLE: AgentUnavailableDetails,
  RUNNER_UNAVAILABLE: RunnerUnavailableDetails,
  CONNECTION_LOST: ConnectionLostDetails,
  INTERNAL: InternalDetails,
} as const satisfies Record<ErrorCode, z.ZodType>

/** The details type of each code. */
export type ErrorDetails = { [C in ErrorCode]: z.infer<(typeof ERROR_DETAILS)[C]> }
