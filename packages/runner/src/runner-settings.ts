// The table of `conch runner` settings: for each one its flag, its CONCH_* variable, what it
// means, its default as the help shows it, and what a valid value is. `runner-config.ts` parses
// with it and `cli-help.ts` prints it, so a setting cannot exist without its description.
import { DRIVERS_BY_STRENGTH } from './driver-choice.ts'
import { RunnerLimits } from './runner-limits.ts'

/** The log levels `--log-level` accepts, most severe first. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

/** How the runner writes its log: `auto` is `pretty` when stderr is a terminal, else `json`. */
export const LOG_FORMATS = ['auto', 'pretty', 'json'] as const

/** One configurable setting of `conch runner`. */
export interface Setting {
  /** Key in RunnerConfig, or in RunnerConfig.limits when `limit`. */
  key: string
  /** Whether the key is one of the limits. */
  limit: boolean
  /** The flag (`--port`), or null for a setting that is only a variable. */
  flag: string | null
  /** The environment variable (`CONCH_PORT`). */
  env: string
  /** The flag's value placeholder (`<port>`); empty for a switch. */
  value: string
  /** A switch: the flag alone means true. */
  boolean: boolean
  /** One or two sentences on what it does. */
  summary: string
  /** The default as the help prints it, when not the schema's default value. */
  defaultText?: string
  /** The allowed values as the help prints them, for settings with a fixed set. */
  values?: string
  /** What a valid value looks like, for the error when a value is not one. */
  accepts: string
}

const kebab = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
const snake = (s: string): string => s.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()

type TopSetting = Omit<Setting, 'limit' | 'flag' | 'env' | 'boolean'> & { boolean?: boolean; flag?: null }

const driverList = DRIVERS_BY_STRENGTH.join(', ')

const TOP: TopSetting[] = [
  {
    key: 'host',
    value: '<address>',
    summary: 'Interface to listen on; use 0.0.0.0 only behind a proxy with TLS.',
    accepts: 'an interface address such as 127.0.0.1 or 0.0.0.0',
  },
  {
    key: 'port',
    value: '<port>',
    summary: 'Port to listen on; 0 picks a free port.',
    accepts: 'an integer from 0 to 65535',
  },
  {
    key: 'stateDir',
    value: '<dir>',
    summary:
      'Folder holding the database, the sandboxes and the agent logs; a relative path is resolved against the working directory.',
    accepts: 'a folder path',
  },
  {
    key: 'driver',
    value: '<name>',
    summary:
      'Driver of a create request that names none; auto is the strongest allowed driver that works on this host.',
    values: `auto, ${driverList}`,
    accepts: `one of auto, ${driverList}`,
  },
  {
    key: 'drivers',
    value: '<list>',
    summary: 'Comma-separated drivers a create request may choose.',
    defaultText: 'every isolating driver that works here, plus the one --driver names',
    values: driverList,
    accepts: `a comma-separated list of at least one of ${driverList}`,
  },
  {
    key: 'sshHosts',
    value: '<file>',
    summary:
      'JSON file of the SSH hosts the ssh driver may run sandboxes on (address, port, user, key file or ssh-agent, known_hosts file); requests pick one by name. Allow the driver with --drivers.',
    defaultText: 'none',
    accepts: 'a path to a JSON file',
  },
  {
    key: 'unsafeLocal',
    value: '',
    boolean: true,
    summary:
      'Allow the local driver (no isolation) while the runner runs as root; for development only. The variable takes 1 or true.',
    defaultText: 'off',
    accepts: '1 or true to allow, 0 or false to refuse',
  },
  {
    key: 'logLevel',
    value: '<level>',
    summary: 'Least severe log level written.',
    values: LOG_LEVELS.join(', '),
    accepts: `one of ${LOG_LEVELS.join(', ')}`,
  },
  {
    key: 'logFormat',
    value: '<format>',
    summary:
      'Log format: auto is short readable lines when stderr is a terminal (coloured unless NO_COLOR is set) and pino JSON lines otherwise.',
    values: LOG_FORMATS.join(', '),
    accepts: `one of ${LOG_FORMATS.join(', ')}`,
  },
  {
    key: 'corsOrigins',
    value: '<list>',
    summary:
      'Comma-separated origins (https://app.example.com, or *) whose browser pages may call the REST API.',
    defaultText: 'none',
    accepts: 'a comma-separated list of http(s) origins, or *',
  },
  {
    key: 'allowPublicPorts',
    value: '',
    boolean: true,
    summary:
      'Allow sandbox ports exposed with public: true, which anyone who knows the URL can reach without a token. The variable takes 1 or true.',
    defaultText: 'off',
    accepts: '1 or true to allow, 0 or false to refuse',
  },
  {
    key: 'previewDomain',
    value: '<domain>',
    summary:
      'Wildcard domain whose names <port>-<sandbox id>.<domain> reach a sandbox port, each on an origin of its own (point *.<domain> at the runner).',
    defaultText: 'none',
    accepts: 'a DNS name such as preview.example.com',
  },
  {
    key: 'egressPermit',
    value: '<list>',
    summary:
      'Comma-separated CIDRs in loopback, private or link-local ranges that sandbox egress may reach anyway (an internal package mirror); the runner itself stays unreachable.',
    defaultText: 'none',
    accepts: 'a comma-separated list of IPv4 or IPv6 CIDRs',
  },
  {
    key: 'egressCredentials',
    value: '<file>',
    summary:
      'JSON file of credentials the egress proxy adds to requests to one host ({"name": {"host": "api.example.com", "headers": {"authorization": "Bearer …"}}}); a create request names the ones its sandbox may use, and the values never enter the sandbox.',
    defaultText: 'none',
    accepts: 'a path to a readable JSON file',
  },
  {
    key: 'egressUpstreamCa',
    value: '<file>',
    summary:
      'PEM file of CA certificates the egress proxy trusts, besides the public roots, when it connects to a host with injected credentials (an internal CA).',
    defaultText: 'none',
    accepts: 'a path to a readable PEM file',
  },
  {
    key: 'shard',
    value: '<name>',
    summary: 'Shard name written into every new sandbox id, so a router can forward requests by id.',
    defaultText: 'none',
    accepts: 'a DNS label of at most 23 characters (lowercase letters, digits and -)',
  },
  {
    key: 'warmPool',
    value: '<n>',
    summary:
      'Sandboxes kept started ahead of demand per driver, so a create with default options (no env, default limits) is answered at once; they count against --max-sandboxes; 0 disables the pool.',
    accepts: 'an integer from 0 to 64',
  },
  {
    key: 'apiKey',
    value: '',
    flag: null,
    summary:
      'The API key clients send as "Authorization: Bearer <key>"; only a variable, so it stays out of process listings.',
    defaultText: 'generated on first start, printed once, stored only as a hash',
    accepts: 'at least 16 characters',
  },
]

/** What each limit does, for the help; the typed error each one raises is on the docs' limits page. */
const LIMIT_SUMMARIES: Record<keyof RunnerLimits, string> = {
  maxSandboxes: 'Sandboxes alive at once (TOO_MANY_SANDBOXES beyond).',
  maxSessionsPerSandbox: 'Sessions per sandbox (TOO_MANY_SESSIONS beyond).',
  maxQueuedRunsPerSandbox: 'Runs running or queued per sandbox (RATE_LIMITED beyond).',
  maxCommandBytes: 'Longest command text in UTF-8 bytes (COMMAND_TOO_LARGE beyond).',
  maxClientFrameBytes: 'Largest WebSocket message from a client (FRAME_TOO_LARGE beyond).',
  outputCapBytes: 'Bytes kept per stream in a buffered result; beyond it the result is cut.',
  maxCommandTimeoutMs: 'Largest per-run timeout; larger ones are lowered to it.',
  defaultIdleTimeoutMs:
    'Idle time (no API call, connected shell or running command) after which a sandbox created without idleTimeoutMs is destroyed; 0: never.',
  defaultHibernateAfterMs:
    'Idle time after which a sandbox created without hibernateAfterMs is snapshotted and stopped (the next request wakes it); 0: never.',
  defaultSessionIdleTimeoutMs:
    'Idle time (no attached client, no command running, no new output) after which a session other than the default one is deleted, for sandboxes created without sessionIdleTimeoutMs; 0: never.',
  maxKeepAliveMs: 'Longest a keep-alive holds a sandbox awake; longer requests are lowered to it.',
  heartbeatIntervalMs: 'Interval of WebSocket and agent-link heartbeats.',
  scrollbackBytes: 'Output an agent keeps per session for reattach (OUTPUT_LOST before it).',
  maxConnections:
    'Open connections at once, HTTP and WebSocket (RATE_LIMITED beyond); lowered at start to fit the open-file limit.',
  maxConnectionsPerClient: 'Open connections from one client address (RATE_LIMITED beyond).',
  maxSocketsPerSession: 'Shell WebSockets open on one session (RATE_LIMITED beyond).',
  unauthenticatedTimeoutMs: 'Time a new connection has to make an authenticated request before it is closed.',
  headersTimeoutMs: "Time a client has to send a request's headers.",
  requestTimeoutMs: 'Time a client has to send a whole request, body included.',
  keepAliveTimeoutMs: 'Time an idle keep-alive connection stays open.',
  maxSnapshots: 'Snapshots kept at once (TOO_MANY_SNAPSHOTS beyond).',
  maxSnapshotsPerSandbox: 'Snapshots kept of one sandbox (TOO_MANY_SNAPSHOTS beyond).',
  maxSnapshotBytes:
    "Bytes of one snapshot: its workspace's file content (sparse files at full size) plus, for a live gVisor snapshot, its checkpoint image (SNAPSHOT_TOO_LARGE beyond).",
  maxSnapshotEntries: "Files, directories and links in one snapshot's workspace (SNAPSHOT_TOO_LARGE beyond).",
  maxExposedPortsPerSandbox: 'Distinct ports exposed per sandbox (TOO_MANY_EXPOSED_PORTS beyond).',
  maxNetworkConnectionsPerSandbox:
    'Port-relay and egress connections open per sandbox (TOO_MANY_CONNECTIONS beyond).',
  sandboxBandwidthBytesPerSecond:
    "Bytes per second a sandbox's relayed and egress traffic may move, each direction; beyond it the traffic slows; 0: unlimited.",
}

/** Every setting, server settings first, then the limits, in help order. */
export const SETTINGS: readonly Setting[] = [
  ...TOP.map(
    (s): Setting => ({
      ...s,
      limit: false,
      boolean: s.boolean ?? false,
      flag: s.flag === null ? null : `--${kebab(s.key)}`,
      env: `CONCH_${snake(s.key)}`,
    }),
  ),
  ...(Object.keys(RunnerLimits.shape) as (keyof RunnerLimits)[]).map(
    (key): Setting => ({
      key,
      limit: true,
      flag: `--${kebab(key)}`,
      env: `CONCH_${snake(key)}`,
      value: '<n>',
      boolean: false,
      summary: LIMIT_SUMMARIES[key],
      accepts:
        key === 'defaultIdleTimeoutMs' ||
        key === 'defaultHibernateAfterMs' ||
        key === 'defaultSessionIdleTimeoutMs'
          ? 'a whole number of milliseconds, 0 for never'
          : key === 'sandboxBandwidthBytesPerSecond'
            ? 'a whole number of bytes per second, 0 for no limit'
            : 'a positive integer',
    }),
  ),
]
