/** Defaults and hard limits shared by every process. The runner makes the `max*` ones configurable. */
export const LIMITS = {
  /** Timeout of a run when neither the call nor the session sets one. */
  defaultCommandTimeoutMs: 30_000,
  /** Smallest timeout a run may ask for; smaller values are raised to it. */
  minCommandTimeoutMs: 1_000,
  /** Default for the runner's configurable maximum timeout; larger values are lowered to it. */
  maxCommandTimeoutMs: 3_600_000,
  /** Time between SIGINT, SIGTERM and SIGKILL when a timeout stops a command. */
  killGraceMs: 1_000,
  /** Time a background process gets between SIGTERM and SIGKILL on kill. */
  processKillGraceMs: 3_000,
  /** Bytes kept per stream in a buffered result before it is cut and marked `truncated`. */
  outputCapBytes: 1_048_576,
  /** Longest command text accepted, in UTF-8 bytes. */
  maxCommandBytes: 1_048_576,
  /** Largest stdin payload accepted with a run or exec, in bytes. */
  maxStdinBytes: 1_048_576,
  /** Largest client WebSocket frame accepted by the runner. */
  maxClientFrameBytes: 4_194_304,
  /** Largest runner↔agent frame (header plus payload). */
  maxAgentFrameBytes: 8_388_608,
  /** Largest payload the agent puts into one data frame. */
  maxDataChunkBytes: 65_536,
  /**
   * Largest payload of one session output frame (`shell_out`/`shell_err`) on the link and on a
   * shell's WebSocket: the agent sends the output records of one event-loop turn that follow
   * each other as one frame up to this, so a flood of output costs every hop a frame per read
   * burst rather than per pipe read. A frame stays within the channel's credit plus one data
   * chunk, the overrun runners allow.
   */
  maxOutputFrameBytes: 262_144,
  /** Output kept per session for reattach, in bytes. */
  scrollbackBytes: 8_388_608,
  /** Bytes a channel may have in flight before the agent waits for credit. */
  channelWindowBytes: 1_048_576,
  /** Output bytes a shell client that acknowledges (`output_ack`) may have unacknowledged by default. */
  clientWindowBytes: 1_048_576,
  /** Smallest window a shell client may ask for: one agent data chunk. */
  minClientWindowBytes: 65_536,
  /** Largest window a shell client may ask for. */
  maxClientWindowBytes: 16_777_216,
  /**
   * Idle time after which the runner destroys a sandbox whose create request gave no
   * `idleTimeoutMs`: no connected shell, no running command and no API call for this long. A
   * crashed client so leaves nothing running for long; the runner can change it, 0 turns it off.
   */
  defaultIdleTimeoutMs: 1_800_000,
  /**
   * Idle time after which the runner hibernates a sandbox whose create request gave no
   * `hibernateAfterMs` (same idleness as `defaultIdleTimeoutMs`): its processes stop and its
   * memory is freed, and the next request wakes it. Only on runners that keep snapshots.
   */
  defaultHibernateAfterMs: 600_000,
  /**
   * Idle time after which the runner deletes a session (never the default one) of a sandbox
   * whose create request gave no `sessionIdleTimeoutMs`: no attached client, no command running
   * or queued, no new output for this long.
   */
  defaultSessionIdleTimeoutMs: 3_600_000,
  /** Longest a keep-alive holds a sandbox awake; longer requests are lowered to it (24 hours). */
  maxKeepAliveMs: 86_400_000,
  /** Default cap on sandboxes per runner. */
  maxSandboxes: 32,
  /** Default cap on sessions per sandbox. */
  maxSessionsPerSandbox: 64,
  /** Default cap on terminals per sandbox. */
  maxTerminalsPerSandbox: 16,
  /** Largest input message a terminal client may send, in bytes. */
  maxTerminalInputBytes: 65_536,
  /** Output kept per terminal for reattach, in bytes (within the agent's scrollback budget). */
  terminalScrollbackBytes: 1_048_576,
  /** Default cap on background processes per sandbox. */
  maxProcessesPerSandbox: 64,
  /** Default cap on runs waiting or running per sandbox before `RATE_LIMITED`. */
  maxQueuedRunsPerSandbox: 1_024,
  /** Interval of WebSocket and agent-link heartbeats. */
  heartbeatIntervalMs: 15_000,
  /** Default lifetime of a sandbox-scoped token. */
  defaultTokenTtlMs: 900_000,
  /** Longest lifetime a sandbox-scoped token may have. */
  maxTokenTtlMs: 86_400_000,
  /** Default cap on the runner's open connections (HTTP and WebSocket); lowered to fit its open-file limit. */
  maxConnections: 4_096,
  /** Default cap on open connections from one client address. */
  maxConnectionsPerClient: 1_024,
  /** Default cap on shell WebSockets open on one session. */
  maxSocketsPerSession: 32,
  /** Time a new connection has to make an authenticated request before the runner closes it. */
  unauthenticatedTimeoutMs: 10_000,
  /** Time a client has to send a request's headers. */
  headersTimeoutMs: 10_000,
  /** Time a client has to send a whole request, body included (not the time to answer it). */
  requestTimeoutMs: 60_000,
  /** Time an idle keep-alive connection stays open; above common load balancers' 60 s idle timeout. */
  keepAliveTimeoutMs: 72_000,
  /** Default cap on snapshots a runner keeps. */
  maxSnapshots: 64,
  /** Default cap on snapshots kept of one sandbox. */
  maxSnapshotsPerSandbox: 16,
  /** Default cap on the bytes of one snapshot: its workspace's file content (sparse files at full size) plus a live snapshot's checkpoint image. */
  maxSnapshotBytes: 2_147_483_648,
  /** Default cap on the files, directories and links in one snapshot's workspace. */
  maxSnapshotEntries: 200_000,
  /** Default cap on distinct ports exposed per sandbox. */
  maxExposedPortsPerSandbox: 32,
  /** Default cap on a sandbox's open port-relay and egress connections together. */
  maxNetworkConnectionsPerSandbox: 256,
  /** Default bytes per second a sandbox's relayed and egress traffic may move, each direction; 0: unlimited. */
  sandboxBandwidthBytesPerSecond: 125_000_000,
} as const

/** Clamps a requested timeout between the minimum and `maxMs`, falling back to `fallbackMs`. */
export function clampTimeout(requestedMs: number | undefined, fallbackMs: number, maxMs: number): number {
  const ms = requestedMs ?? fallbackMs
  return Math.min(Math.max(ms, LIMITS.minCommandTimeoutMs), maxMs)
}

/**
 * Limits every isolated sandbox gets unless its create request sets them: code inside a
 * sandbox must not be able to take the host's memory, CPU, processes or disk.
 */
export const DEFAULT_SANDBOX_LIMITS = {
  /** 1 GiB of memory for the sandbox's commands (tmpfs files in /tmp and /dev/shm count). */
  memoryBytes: 1024 * 1024 * 1024,
  /** One CPU. */
  cpus: 1,
  /** 1024 processes and threads. */
  pids: 1024,
  /** 8 GiB of workspace. */
  diskBytes: 8 * 1024 * 1024 * 1024,
} as const
