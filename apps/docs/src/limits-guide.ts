// The hand-written half of the limits table on /concepts/limits/: for every entry of the
// protocol's LIMITS, what it limits, the runner setting that changes it (if any), and what
// happens at the limit. The values themselves come from LIMITS at build time.
import type { LIMITS } from '@conch/protocol'

/** One row of the limits table. */
export interface LimitGuideEntry {
  /** What it limits. */
  what: string
  /** The runner setting that changes it: a `conch runner` flag name without `--`. */
  setting: string | null
  /** What happens at the limit. */
  effect: string
  /** How to print the value. */
  unit: 'ms' | 'bytes' | 'count'
}

/** One entry per LIMITS key; a new limit without an entry fails typecheck. */
export const LIMITS_GUIDE: Record<keyof typeof LIMITS, LimitGuideEntry> = {
  defaultCommandTimeoutMs: {
    what: 'Timeout of a run when neither the call nor the session sets one',
    setting: null,
    effect: 'The run is stopped and resolves with `timedOut: true`',
    unit: 'ms',
  },
  minCommandTimeoutMs: {
    what: 'Smallest timeout a run may have',
    setting: null,
    effect: 'Smaller values are raised to it',
    unit: 'ms',
  },
  maxCommandTimeoutMs: {
    what: 'Largest timeout a run may have',
    setting: 'max-command-timeout-ms',
    effect: 'Larger values are lowered to it',
    unit: 'ms',
  },
  killGraceMs: {
    what: 'Time between SIGINT, SIGTERM and SIGKILL when a timeout stops a command',
    setting: null,
    effect: 'The next signal is sent',
    unit: 'ms',
  },
  processKillGraceMs: {
    what: 'Time between SIGTERM and SIGKILL when a background process is killed',
    setting: null,
    effect: 'SIGKILL is sent',
    unit: 'ms',
  },
  outputCapBytes: {
    what: 'Bytes kept per stream in a buffered result',
    setting: 'output-cap-bytes',
    effect: 'The result is cut on a character boundary and `truncated` is set; streaming is not limited',
    unit: 'bytes',
  },
  maxCommandBytes: {
    what: 'Length of a command text, in UTF-8 bytes',
    setting: 'max-command-bytes',
    effect: '[`COMMAND_TOO_LARGE`](/reference/errors/#command_too_large)',
    unit: 'bytes',
  },
  maxStdinBytes: {
    what: 'Size of the `stdin` data of one run or exec',
    setting: null,
    effect: '[`BAD_REQUEST`](/reference/errors/#bad_request)',
    unit: 'bytes',
  },
  maxClientFrameBytes: {
    what: 'Size of one WebSocket message from a client',
    setting: 'max-client-frame-bytes',
    effect: '[`FRAME_TOO_LARGE`](/reference/errors/#frame_too_large); the socket stays open',
    unit: 'bytes',
  },
  maxAgentFrameBytes: {
    what: 'Size of one frame between the runner and an agent',
    setting: null,
    effect: 'The link rejects the frame',
    unit: 'bytes',
  },
  maxDataChunkBytes: {
    what: 'Bytes of output the agent puts into one data frame',
    setting: null,
    effect: 'Longer output is split into several frames',
    unit: 'bytes',
  },
  maxOutputFrameBytes: {
    what: "Bytes of a shell's output in one frame to the runner and to a client",
    setting: null,
    effect: 'A flood of output goes in several frames; text callbacks get pieces of at most 64 KiB',
    unit: 'bytes',
  },
  scrollbackBytes: {
    what: 'Output kept per session for reattach',
    setting: 'scrollback-bytes',
    effect:
      'Older output is evicted; resuming before it gives [`OUTPUT_LOST`](/reference/errors/#output_lost)',
    unit: 'bytes',
  },
  channelWindowBytes: {
    what: 'Output in flight per stream before the agent waits for the client',
    setting: null,
    effect: 'The command blocks on write until the client reads (backpressure)',
    unit: 'bytes',
  },
  clientWindowBytes: {
    what: 'Output a shell client may have received but not consumed (default window of `output_ack`)',
    setting: null,
    effect: 'The command blocks on write until the client consumes output (backpressure)',
    unit: 'bytes',
  },
  minClientWindowBytes: {
    what: 'Smallest window a shell client may ask for in its `hello`',
    setting: null,
    effect: '[`INVALID_FRAME`](/reference/errors/#invalid_frame) for the `hello`',
    unit: 'bytes',
  },
  maxClientWindowBytes: {
    what: 'Largest window a shell client may ask for in its `hello`',
    setting: null,
    effect: '[`INVALID_FRAME`](/reference/errors/#invalid_frame) for the `hello`',
    unit: 'bytes',
  },
  defaultIdleTimeoutMs: {
    what: 'Idle time (no API call, connected shell or running command) before a sandbox created without `idleTimeoutMs` is destroyed',
    setting: 'default-idle-timeout-ms',
    effect:
      'The sandbox is destroyed; `idleTimeoutMs: null` on create keeps it, `0` here turns the default off',
    unit: 'ms',
  },
  defaultHibernateAfterMs: {
    what: 'Idle time before a sandbox created without `hibernateAfterMs` is snapshotted and stopped',
    setting: 'default-hibernate-after-ms',
    effect:
      'The sandbox hibernates (no memory, no processes) and the next request wakes it; `hibernateAfterMs: null` on create keeps it awake, `0` here turns the default off',
    unit: 'ms',
  },
  defaultSessionIdleTimeoutMs: {
    what: 'Idle time (no attached client, no command running, no new output) before a session other than `default` is deleted',
    setting: 'default-session-idle-timeout-ms',
    effect:
      'The session is deleted; `sessionIdleTimeoutMs: null` on create keeps sessions, `0` here turns the default off',
    unit: 'ms',
  },
  maxKeepAliveMs: {
    what: 'Longest one `keepAlive` holds a sandbox awake',
    setting: 'max-keep-alive-ms',
    effect: 'A longer request is lowered to it; calling again replaces the previous hold, it never adds up',
    unit: 'ms',
  },
  maxSandboxes: {
    what: 'Sandboxes alive on one runner',
    setting: 'max-sandboxes',
    effect: '[`TOO_MANY_SANDBOXES`](/reference/errors/#too_many_sandboxes)',
    unit: 'count',
  },
  maxSessionsPerSandbox: {
    what: 'Sessions in one sandbox',
    setting: 'max-sessions-per-sandbox',
    effect: '[`TOO_MANY_SESSIONS`](/reference/errors/#too_many_sessions)',
    unit: 'count',
  },
  maxProcessesPerSandbox: {
    what: 'Background processes in one sandbox',
    setting: null,
    effect: '[`TOO_MANY_PROCESSES`](/reference/errors/#too_many_processes)',
    unit: 'count',
  },
  maxTerminalsPerSandbox: {
    what: 'Terminals running in one sandbox',
    setting: null,
    effect: '[`TOO_MANY_TERMINALS`](/reference/errors/#too_many_terminals)',
    unit: 'count',
  },
  maxTerminalInputBytes: {
    what: 'One input message on a terminal socket',
    setting: null,
    effect: 'an `error` frame with `FRAME_TOO_LARGE`; the socket stays open',
    unit: 'bytes',
  },
  terminalScrollbackBytes: {
    what: "A terminal's output kept for reattach (within the agent's scrollback budget)",
    setting: null,
    effect: 'older output is evicted; reattaching before it gives `OUTPUT_LOST`',
    unit: 'bytes',
  },
  maxQueuedRunsPerSandbox: {
    what: 'Runs running or waiting in one sandbox',
    setting: 'max-queued-runs-per-sandbox',
    effect: '[`RATE_LIMITED`](/reference/errors/#rate_limited)',
    unit: 'count',
  },
  heartbeatIntervalMs: {
    what: 'Interval of WebSocket and agent-link heartbeats',
    setting: 'heartbeat-interval-ms',
    effect: 'A peer that stops answering is disconnected; shells and runs continue',
    unit: 'ms',
  },
  defaultTokenTtlMs: {
    what: 'Lifetime of a sandbox-scoped token when none is asked for',
    setting: null,
    effect:
      'The token stops working ([`UNAUTHORIZED`](/reference/errors/#unauthorized)); shell sockets opened with it are closed',
    unit: 'ms',
  },
  maxTokenTtlMs: {
    what: 'Longest lifetime of a sandbox-scoped token',
    setting: null,
    effect: 'Longer requests are refused',
    unit: 'ms',
  },
  maxConnections: {
    what: 'Open connections to the runner, HTTP and WebSocket; lowered at start to fit its open-file limit',
    setting: 'max-connections',
    effect: 'A new connection gets [`RATE_LIMITED`](/reference/errors/#rate_limited) and is closed',
    unit: 'count',
  },
  maxConnectionsPerClient: {
    what: 'Open connections from one client address',
    setting: 'max-connections-per-client',
    effect: 'A new connection gets [`RATE_LIMITED`](/reference/errors/#rate_limited) and is closed',
    unit: 'count',
  },
  maxSocketsPerSession: {
    what: 'Shell WebSockets open on one session',
    setting: 'max-sockets-per-session',
    effect: '[`RATE_LIMITED`](/reference/errors/#rate_limited); the socket is refused or closed',
    unit: 'count',
  },
  unauthenticatedTimeoutMs: {
    what: 'Time a new connection has to make an authenticated request',
    setting: 'unauthenticated-timeout-ms',
    effect: 'The connection is closed',
    unit: 'ms',
  },
  headersTimeoutMs: {
    what: "Time a client has to send a request's headers",
    setting: 'headers-timeout-ms',
    effect: 'The connection is closed',
    unit: 'ms',
  },
  requestTimeoutMs: {
    what: 'Time a client has to send a whole request, body included (not the time to answer it)',
    setting: 'request-timeout-ms',
    effect: 'The request gets a 408 and the connection is closed',
    unit: 'ms',
  },
  keepAliveTimeoutMs: {
    what: 'Time an idle keep-alive connection stays open',
    setting: 'keep-alive-timeout-ms',
    effect: 'The connection is closed; the client opens a new one',
    unit: 'ms',
  },
  maxSnapshots: {
    what: 'Snapshots a runner keeps',
    setting: 'max-snapshots',
    effect: '[`TOO_MANY_SNAPSHOTS`](/reference/errors/#too_many_snapshots); delete old snapshots',
    unit: 'count',
  },
  maxSnapshotsPerSandbox: {
    what: 'Snapshots kept of one sandbox',
    setting: 'max-snapshots-per-sandbox',
    effect: '[`TOO_MANY_SNAPSHOTS`](/reference/errors/#too_many_snapshots); delete one of its snapshots',
    unit: 'count',
  },
  maxSnapshotBytes: {
    what: "Bytes of one snapshot: its workspace's file content (a sparse file counts at its full size) plus a live gVisor snapshot's checkpoint image",
    setting: 'max-snapshot-bytes',
    effect: '[`SNAPSHOT_TOO_LARGE`](/reference/errors/#snapshot_too_large); nothing is stored',
    unit: 'bytes',
  },
  maxSnapshotEntries: {
    what: "Files, directories and links in one snapshot's workspace",
    setting: 'max-snapshot-entries',
    effect: '[`SNAPSHOT_TOO_LARGE`](/reference/errors/#snapshot_too_large); nothing is stored',
    unit: 'count',
  },
  maxExposedPortsPerSandbox: {
    what: 'Distinct ports exposed in one sandbox at once',
    setting: 'max-exposed-ports-per-sandbox',
    effect: '[`TOO_MANY_EXPOSED_PORTS`](/reference/errors/#too_many_exposed_ports); `unexposePort` frees one',
    unit: 'count',
  },
  maxNetworkConnectionsPerSandbox: {
    what: "A sandbox's open port-relay and egress connections together",
    setting: 'max-network-connections-per-sandbox',
    effect:
      '[`TOO_MANY_CONNECTIONS`](/reference/errors/#too_many_connections); other sandboxes are not affected',
    unit: 'count',
  },
  sandboxBandwidthBytesPerSecond: {
    what: "Bytes per second of a sandbox's relayed and egress traffic, each direction",
    setting: 'sandbox-bandwidth-bytes-per-second',
    effect: 'the traffic slows (backpressure); nothing fails',
    unit: 'bytes',
  },
}

/** A limit's value for humans: `30 s`, `1 MiB`, `64`. */
export function formatLimit(value: number, unit: LimitGuideEntry['unit']): string {
  if (unit === 'bytes') {
    if (value % 1_048_576 === 0) return `${value / 1_048_576} MiB`
    if (value % 1024 === 0) return `${value / 1024} KiB`
    return `${value} bytes`
  }
  if (unit === 'ms') {
    if (value % 3_600_000 === 0) return `${value / 3_600_000} h`
    if (value % 60_000 === 0) return `${value / 60_000} min`
    if (value % 1000 === 0) return `${value / 1000} s`
    return `${value} ms`
  }
  return String(value)
}
