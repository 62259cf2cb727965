// The options of `Sandbox`'s constructors and methods: how to reach a runner, what a new
// sandbox gets, and the options of sessions, shells, processes, exec and exposed ports.
import type { OutputEncoding } from './command-result.ts'
import type { SandboxLimits } from './resource-info.ts'
import type { RetryPolicy } from './retry-policy.ts'
import type { ExecOptions } from './session.ts'
import type { ConnectionPolicy } from './shell-connection.ts'
import type { ShellOutput } from './shell-run-options.ts'
import type { FetchLike, WebSocketConstructor } from './web-socket-like.ts'

/**
 * How to reach a runner. Pass `apiKey` on a server, or a sandbox-scoped `token` (from
 * `sb.createAccessToken()`) in a browser or another untrusted place.
 *
 * @example
 * ```ts
 * const sb = await Sandbox.connect(id, { url: 'http://127.0.0.1:7878', apiKey, requestTimeoutMs: 10_000 })
 * ```
 */
export interface ConnectOptions {
  /** Runner base URL, such as `http://127.0.0.1:7070`. */
  url: string
  /** The runner's API key (`conch_...`); full access. `undefined` is allowed, so `process.env.CONCH_API_KEY` fits. */
  apiKey?: string | undefined
  /** A sandbox-scoped token (`cst_...`); access to one sandbox only. */
  token?: string | undefined
  /** The fetch to use; default `globalThis.fetch`. */
  fetch?: FetchLike
  /**
   * The WebSocket constructor to use. Default: on Node the `ws` package when it is installed,
   * else `globalThis.WebSocket`, else `ws`; pass `globalThis.WebSocket` to keep Node's built-in.
   */
  WebSocket?: WebSocketConstructor
  /** Deadline of each REST call that has no command timeout of its own; default 30 s. */
  requestTimeoutMs?: number
  /** Bytes kept per stream in a buffered shell result before it is cut; default 1 MiB. */
  maxOutputBytes?: number
  /** Heartbeat and reconnect policy of shell sockets. */
  connection?: Partial<ConnectionPolicy>
  /**
   * Retries of REST calls the runner refused for now (429, 503) or could not take (connection
   * failures), made only where a second try cannot do the work twice; `false` turns them off.
   * Default `{ attempts: 4, baseDelayMs: 200, maxDelayMs: 5_000 }`.
   */
  retry?: Partial<RetryPolicy> | false
}

/**
 * Options of `Sandbox.create`: how to reach the runner, plus the new sandbox's settings.
 *
 * @example
 * ```ts
 * const sb = await Sandbox.create({ url, apiKey, env: { CI: '1' }, idleTimeoutMs: 10 * 60_000, metadata: { task: 't-42' } })
 * ```
 */
export interface CreateSandboxOptions extends ConnectOptions {
  /** Driver name; default: the runner's. */
  driver?: string
  /** For the `ssh` driver: the name of an SSH host the runner's operator configured (never an address). */
  host?: string
  /** Base environment of every session. */
  env?: Record<string, string>
  /** Resource limits. */
  limits?: SandboxLimits
  /**
   * Destroy the sandbox after this long idle: no API activity, no attached client (shell,
   * terminal, port relay, output follower), no running command, no keep-alive. Counted while it
   * hibernates too. Default: the runner's (30 minutes unless its operator changed it); `null`: never.
   */
  idleTimeoutMs?: number | null
  /**
   * Hibernate the sandbox after this long idle (same idleness as `idleTimeoutMs`): it is
   * snapshotted and stopped, freeing its memory and processes, and the next request wakes it
   * (a reattached shell gets `resumed`). Must be shorter than `idleTimeoutMs`. Default: the
   * runner's (10 minutes unless its operator changed it; never on a runner without snapshots);
   * `null`: never.
   */
  hibernateAfterMs?: number | null
  /**
   * Delete a session (never `default`) after this long with no attached client, no command
   * running or queued and no new output. Default: the runner's (1 hour unless its operator
   * changed it); `null`: never.
   */
  sessionIdleTimeoutMs?: number | null
  /** Free-form labels, returned as given. */
  metadata?: Record<string, string>
  /**
   * Fork a snapshot: the new sandbox starts with its workspace and every session (same ids,
   * cwd, variables, functions, aliases, options, traps, history). Settings left out here are
   * the snapshot's. `info.restoredFrom` tells how it went.
   */
  fromSnapshot?: string
  /** With `fromSnapshot`: start again the background processes that were running (they restart; they do not continue). */
  restartProcesses?: boolean
  /**
   * Network policy. No egress by default; an allowlist of hosts (`api.example.com`,
   * `*.example.org`, `10.0.0.0/8:5432`) gives the sandbox an HTTP(S) proxy, set in
   * `HTTP_PROXY`/`HTTPS_PROXY`, that reaches only those. Needs an isolating driver.
   * `credentials` names credentials the runner's operator defined (`--egress-credentials`): the
   * proxy adds their headers to requests to their hosts, which must be on `allow`, so the secret
   * never enters the sandbox. Only the API key may grant them.
   */
  network?: { egress: 'none' | { allow: string[]; credentials?: string[] } }
}

/**
 * Options of `sb.exposePort`.
 *
 * @example
 * ```ts
 * const { url } = await sb.exposePort(3000, { ttlMs: 60 * 60_000 })
 * ```
 */
export interface ExposePortOptions {
  /** Reachable by anyone with the URL, without a token; the runner must allow it (`--allow-public-ports`). */
  public?: boolean
  /** Lifetime of the port token; default 15 minutes, at most 24 hours. */
  ttlMs?: number
}

/**
 * Options of `sb.exec`.
 *
 * @example
 * ```ts
 * const r = await sb.exec('make', { cwd: '/workspace/app', env: { JOBS: '4' }, timeoutMs: 120_000 })
 * ```
 */
export interface SandboxExecOptions<E extends OutputEncoding = 'utf8'> extends ExecOptions<E> {
  /** Working directory of the fresh process. */
  cwd?: string
  /** Variables added to the fresh process's environment. */
  env?: Record<string, string>
  /** Run in this session's shell instead of a fresh process (state persists). */
  sessionId?: string
}

/**
 * Options of a new session.
 *
 * @example
 * ```ts
 * const s = await sb.createSession({ id: 'build', cwd: 'app', env: { NODE_ENV: 'test' }, commandTimeoutMs: 60_000 })
 * ```
 */
export interface SessionOptions {
  /** Session id; generated when absent. */
  id?: string
  /** Variables added to the session's starting environment. */
  env?: Record<string, string>
  /** Starting directory; relative paths resolve against the workspace. */
  cwd?: string
  /** Default timeout of this session's runs. */
  commandTimeoutMs?: number
  /** Start from an empty environment instead of the sandbox's base environment. */
  cleanEnv?: boolean
}

/**
 * Options of `sb.shell`.
 *
 * @example
 * ```ts
 * await using sh = await sb.shell({ cwd: 'app', onOutput: (o) => console.log('background:', o.data) })
 * ```
 */
export interface ShellOptions extends SessionOptions {
  /** Output no run of this shell owns: background jobs between runs, other clients' runs. */
  onOutput?: (output: ShellOutput) => void
}

/**
 * Options of `sb.reattachShell`.
 *
 * @example
 * ```ts
 * const sh = await sb.reattachShell(sessionId, { offset: lastSeenOffset, onOutput: (o) => log(o.data) })
 * ```
 */
export interface ReattachOptions {
  /** Replay output from this log offset; default: only new output. */
  offset?: number
  /** Output no run of this shell owns, including the replay. */
  onOutput?: (output: ShellOutput) => void
}

/**
 * Options of `sb.startProcess`.
 *
 * @example
 * ```ts
 * const p = await sb.startProcess('npm run dev', { sessionId: sh.sessionId }) // inherits the shell's cwd and env
 * ```
 */
export interface StartProcessOptions {
  /** Working directory. */
  cwd?: string
  /** Variables added to its environment. */
  env?: Record<string, string>
  /** Take the starting cwd and exported environment from this session's shell. */
  sessionId?: string
  /**
   * Keep the sandbox awake (no idle hibernation or deletion) while this process runs, for at
   * most the runner's keep-alive cap (24 hours unless its operator changed it). At most 16 per
   * sandbox (`RATE_LIMITED` beyond).
   */
  keepAlive?: boolean
}
