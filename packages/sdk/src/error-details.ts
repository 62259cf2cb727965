// The typed `details` of every error code, as plain interfaces: they mirror the protocol's
// `ErrorDetails` field for field (test/public-api.test.ts holds them equal), so the published
// `.d.ts` is readable and needs no zod. At runtime `errorFromWire` checks details against JSON
// Schema generated from the same zod schemas and keeps them only when they match.

/** A limit that was hit: the limit and the value that reached it (a count or a size in bytes). */
export interface LimitDetails {
  /** The configured limit. */
  limit: number
  /** The value that reached or passed it. */
  value: number
}

/** The path an error is about, cut to 200 characters. */
export interface PathDetails {
  /** The path as the caller gave it. */
  path: string
}

/** The session an error is about. */
export interface SessionDetails {
  /** The session's id. */
  sessionId: string
}

/** BAD_REQUEST: the fields that failed, the path or offsets involved, or the allowed values. */
export interface BadRequestDetails {
  /** Up to five schema issues, each with the field path and what was expected. */
  issues?: { path: string[]; message: string }[] | undefined
  /** The path the request named. */
  path?: string | undefined
  /** The values the field allows. */
  allowed?: string[] | undefined
  /** The offset asked for, when it was past the end of the log. */
  requestedOffset?: number | undefined
  /** The end of the log. */
  endOffset?: number | undefined
}

/** SHELL_CLOSED: which session's shell closed and how. */
export interface ShellClosedDetails {
  /** The session whose shell closed. */
  sessionId: string
  /** bash's exit status, when it exited. */
  code: number | null
  /** The signal that killed bash, when one did. */
  signal: string | null
  /** Why it closed, for people. */
  reason: string
}

/** OUTPUT_LOST: the oldest offset still held, and the one asked for. */
export interface OutputLostDetails {
  /** The oldest log offset still in the scrollback. */
  earliestOffset: number
  /** The offset the client asked to resume from. */
  requestedOffset?: number | undefined
}

/** AGENT_UNAVAILABLE and SANDBOX_NOT_RUNNING: the sandbox's state and why its agent does not answer. */
export interface AgentUnavailableDetails {
  /** The sandbox's status. */
  status?: 'starting' | 'running' | 'unreachable' | 'dead' | 'destroyed' | undefined
  /** Why the agent does not answer. */
  reason?: string | null | undefined
}

/** RUNNER_UNAVAILABLE: the runner shards a router could not reach. */
export interface RunnerUnavailableDetails {
  /** The shard holding the sandbox, when one shard failed. */
  shard?: string | undefined
  /** Every shard that failed, when the request needed several. */
  shards?: string[] | undefined
}

/** CONNECTION_LOST: how the socket closed, when it did. */
export interface ConnectionLostDetails {
  /** The WebSocket close code. */
  closeCode?: number | undefined
  /** The WebSocket close reason. */
  closeReason?: string | undefined
}

/** UNAUTHORIZED: when the token expired, for a socket closed by its token's expiry. */
export interface UnauthorizedDetails {
  /** When the token expired, in milliseconds since the epoch. */
  expiredAt?: number | undefined
}

/** No facts beyond the message. */
export type NoDetails = Record<string, never>

/**
 * The details of each error code. `err.details` of a `ConchError<C>` is a `Partial` of
 * `ErrorDetails[C]`: a field is there when the runner sent it and it matched its schema.
 *
 * @example
 * ```ts
 * if (err instanceof ConchError && err.code === 'TOO_MANY_SESSIONS') console.log(err.details.limit)
 * ```
 */
export interface ErrorDetails {
  BAD_REQUEST: BadRequestDetails
  INVALID_FRAME: NoDetails
  UNKNOWN_FRAME_TYPE: NoDetails
  FRAME_TOO_LARGE: Partial<LimitDetails>
  COMMAND_TOO_LARGE: LimitDetails
  INVALID_COMMAND: NoDetails
  UNSUPPORTED_PROTOCOL_VERSION: NoDetails
  UNAUTHORIZED: UnauthorizedDetails
  FORBIDDEN: Partial<PathDetails>
  NOT_FOUND: NoDetails
  SANDBOX_NOT_FOUND: { sandboxId?: string | undefined }
  SESSION_NOT_FOUND: SessionDetails
  PROCESS_NOT_FOUND: { processId: string }
  FILE_NOT_FOUND: PathDetails
  HISTORY_NOT_FOUND: NoDetails
  SNAPSHOT_NOT_FOUND: { snapshotId: string }
  SNAPSHOT_TOO_LARGE: { limit: number; value?: number | undefined }
  SNAPSHOT_INCOMPATIBLE: { formatVersion: number | null }
  TOO_MANY_SNAPSHOTS: { limit: number; value?: number | undefined }
  SESSION_EXISTS: SessionDetails
  SESSION_PROTECTED: SessionDetails
  SESSION_BUSY: SessionDetails
  PORT_NOT_LISTENING: { port?: number | undefined }
  TERMINAL_NOT_FOUND: { terminal?: string | undefined }
  TOO_MANY_TERMINALS: Partial<LimitDetails>
  TOO_MANY_EXPOSED_PORTS: LimitDetails
  TOO_MANY_CONNECTIONS: LimitDetails
  SSH_HOST_UNKNOWN: { host?: string | undefined; hosts?: string[] | undefined }
  SSH_HOST_KEY_REJECTED: { host?: string | undefined }
  SHELL_CLOSED: ShellClosedDetails
  SANDBOX_NOT_RUNNING: AgentUnavailableDetails
  PATH_OUTSIDE_SANDBOX: PathDetails
  NOT_A_DIRECTORY: PathDetails
  IS_A_DIRECTORY: PathDetails
  FILE_EXISTS: PathDetails
  DIRECTORY_NOT_EMPTY: PathDetails
  OUTPUT_LOST: OutputLostDetails
  LIMITS_NOT_ENFORCEABLE: NoDetails
  TOO_MANY_SANDBOXES: LimitDetails
  TOO_MANY_SESSIONS: LimitDetails
  TOO_MANY_PROCESSES: LimitDetails
  RATE_LIMITED: LimitDetails
  DEADLINE_EXCEEDED: NoDetails
  AGENT_UNAVAILABLE: AgentUnavailableDetails
  RUNNER_UNAVAILABLE: RunnerUnavailableDetails
  CONNECTION_LOST: ConnectionLostDetails
  INTERNAL: { code?: string | undefined }
}
