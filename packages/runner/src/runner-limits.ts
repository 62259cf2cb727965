import { LIMITS } from '@conch/protocol'
import { z } from 'zod'

const positive = z.coerce.number().int().positive()

/** The runner's configurable limits; each has the protocol default and a typed error when exceeded. */
export const RunnerLimits = z.object({
  /** Sandboxes alive at once (TOO_MANY_SANDBOXES beyond). */
  maxSandboxes: positive.default(LIMITS.maxSandboxes),
  /** Sessions per sandbox (TOO_MANY_SESSIONS beyond). */
  maxSessionsPerSandbox: positive.default(LIMITS.maxSessionsPerSandbox),
  /** Runs running or queued per sandbox (RATE_LIMITED beyond). */
  maxQueuedRunsPerSandbox: positive.default(LIMITS.maxQueuedRunsPerSandbox),
  /** Longest command text in UTF-8 bytes (COMMAND_TOO_LARGE beyond). */
  maxCommandBytes: positive.default(LIMITS.maxCommandBytes),
  /** Largest client WebSocket frame (FRAME_TOO_LARGE beyond). */
  maxClientFrameBytes: positive.default(LIMITS.maxClientFrameBytes),
  /** Bytes kept per stream in a buffered result. */
  outputCapBytes: positive.default(LIMITS.outputCapBytes),
  /** Largest per-call timeout; larger ones are lowered to it. */
  maxCommandTimeoutMs: positive.default(LIMITS.maxCommandTimeoutMs),
  /** Idle time after which a sandbox created without `idleTimeoutMs` is destroyed; 0: never. */
  defaultIdleTimeoutMs: z.coerce.number().int().nonnegative().default(LIMITS.defaultIdleTimeoutMs),
  /** Idle time after which a sandbox created without `hibernateAfterMs` hibernates; 0: never. */
  defaultHibernateAfterMs: z.coerce.number().int().nonnegative().default(LIMITS.defaultHibernateAfterMs),
  /** Idle time after which a session of a sandbox created without `sessionIdleTimeoutMs` is deleted; 0: never. */
  defaultSessionIdleTimeoutMs: z.coerce
    .number()
    .int()
    .nonnegative()
    .default(LIMITS.defaultSessionIdleTimeoutMs),
  /** Longest a keep-alive holds a sandbox awake; longer requests are lowered to it. */
  maxKeepAliveMs: positive.default(LIMITS.maxKeepAliveMs),
  /** Interval of WebSocket and agent-link heartbeats. */
  heartbeatIntervalMs: positive.default(LIMITS.heartbeatIntervalMs),
  /** Bytes of scrollback an agent keeps per session. */
  scrollbackBytes: positive.default(LIMITS.scrollbackBytes),
  /** Open connections at once, HTTP and WebSocket (RATE_LIMITED beyond); lowered to fit the open-file limit. */
  maxConnections: positive.default(LIMITS.maxConnections),
  /** Open connections from one client address (RATE_LIMITED beyond). */
  maxConnectionsPerClient: positive.default(LIMITS.maxConnectionsPerClient),
  /** Shell WebSockets open on one session (RATE_LIMITED beyond). */
  maxSocketsPerSession: positive.default(LIMITS.maxSocketsPerSession),
  /** Time a new connection has to make an authenticated request; then it is closed. */
  unauthenticatedTimeoutMs: positive.default(LIMITS.unauthenticatedTimeoutMs),
  /** Time a client has to send a request's headers; then the connection is closed. */
  headersTimeoutMs: positive.default(LIMITS.headersTimeoutMs),
  /** Time a client has to send a whole request; then it gets a 408 and the connection is closed. */
  requestTimeoutMs: positive.default(LIMITS.requestTimeoutMs),
  /** Time an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: positive.default(LIMITS.keepAliveTimeoutMs),
  /** Snapshots kept at once (TOO_MANY_SNAPSHOTS beyond). */
  maxSnapshots: positive.default(LIMITS.maxSnapshots),
  /** Snapshots kept of one sandbox (TOO_MANY_SNAPSHOTS beyond). */
  maxSnapshotsPerSandbox: positive.default(LIMITS.maxSnapshotsPerSandbox),
  /** Bytes of one snapshot: its workspace's file content plus a live snapshot's image (SNAPSHOT_TOO_LARGE beyond). */
  maxSnapshotBytes: positive.default(LIMITS.maxSnapshotBytes),
  /** Files, directories and links in one snapshot's workspace (SNAPSHOT_TOO_LARGE beyond). */
  maxSnapshotEntries: positive.default(LIMITS.maxSnapshotEntries),
  /** Distinct ports exposed per sandbox (TOO_MANY_EXPOSED_PORTS beyond). */
  maxExposedPortsPerSandbox: positive.default(LIMITS.maxExposedPortsPerSandbox),
  /** Port-relay and egress connections open per sandbox (TOO_MANY_CONNECTIONS beyond). */
  maxNetworkConnectionsPerSandbox: positive.default(LIMITS.maxNetworkConnectionsPerSandbox),
  /** Bytes per second per direction of a sandbox's relayed and egress traffic; 0: unlimited. */
  sandboxBandwidthBytesPerSecond: z.coerce
    .number()
    .int()
    .nonnegative()
    .default(LIMITS.sandboxBandwidthBytesPerSecond),
})
/** Runner limits after defaults. */
export type RunnerLimits = z.infer<typeof RunnerLimits>
/** Runner limits as a caller may give them (any subset). */
export type RunnerLimitsInput = z.input<typeof RunnerLimits>

/** The limits with every default applied. */
export function defaultLimits(overrides: RunnerLimitsInput = {}): RunnerLimits {
  return RunnerLimits.parse(overrides)
}
