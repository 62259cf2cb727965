import { LIMITS } from '@conch/protocol'
import { asyncDispose } from './async-dispose.ts'
import { BackgroundProcess } from './background-process.ts'
import { encodeBase64 } from './base64.ts'
import { type CommandResult, fromRunResult, type OutputEncoding, type OutputOf } from './command-result.ts'
import { AuthError, ConchError } from './conch-error.ts'
import { HttpClient } from './http-client.ts'
import { ndjsonLines } from './ndjson-lines.ts'
import type {
  AccessToken,
  ExposedPort,
  ListeningPort,
  PortEvent,
  ProcessInfo,
  SandboxInfo,
  SessionInfo,
  SnapshotInfo,
} from './resource-info.ts'
import {
  accessToken,
  exposedPort,
  okBody,
  portEvent,
  portList,
  processInfo,
  processList,
  runResult,
  sandboxInfo,
  sandboxList,
  sessionInfo,
  sessionList,
  snapshotInfo,
  snapshotList,
  terminalInfo,
  terminalList,
} from './rest-shapes.ts'
import { retryPolicy } from './retry-policy.ts'
import { commandDeadlineMs, stdinFields } from './run-budget.ts'
import { SandboxFiles } from './sandbox-files.ts'
import type {
  ConnectOptions,
  CreateSandboxOptions,
  ExposePortOptions,
  ReattachOptions,
  SandboxExecOptions,
  SessionOptions,
  ShellOptions,
  StartProcessOptions,
} from './sandbox-options.ts'
import { Session } from './session.ts'
import { Shell } from './shell.ts'
import { DEFAULT_CONNECTION_POLICY } from './shell-connection.ts'
import type { ShellOutput } from './shell-run-options.ts'
import { Terminal, type TerminalInfo, type TerminalOptions } from './terminal.ts'
import { type FetchLike, resolveWebSocket, type WebSocketConstructor } from './web-socket-like.ts'

interface Resolved {
  http: HttpClient
  secret: string
  options: ConnectOptions
}

/** Rejects a runner URL that fetch could not use, saying how to write it instead. */
function checkRunnerUrl(url: string): void {
  let parsed: URL | null = null
  try {
    parsed = new URL(url)
  } catch {
    // Not absolute: reported below.
  }
  // `localhost:7878` parses, with `localhost:` as its scheme; only http(s) reaches a runner.
  if (parsed?.protocol === 'http:' || parsed?.protocol === 'https:') return
  throw new ConchError(
    'BAD_REQUEST',
    `invalid runner url ${JSON.stringify(url)}: include the scheme, such as http://127.0.0.1:7878 (https:// behind TLS)`,
  )
}

function resolve(options: ConnectOptions): Resolved {
  checkRunnerUrl(options.url)
  const secret = options.apiKey ?? options.token
  if (!secret) {
    throw new AuthError(
      'UNAUTHORIZED',
      'no credentials: pass { apiKey } (on a server) or { token } (in a browser)',
    )
  }
  const fetchImpl: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const http = new HttpClient({
    baseUrl: options.url,
    secret,
    fetch: fetchImpl,
    requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    retry: retryPolicy(options.retry),
  })
  return { http, secret, options }
}

/**
 * A sandbox: a workspace with files, processes and any number of bash sessions, on a runner
 * you host. Create one, run commands, destroy it.
 *
 * @example
 * ```ts
 * import { Sandbox } from '@conch/sdk'
 *
 * await using sb = await Sandbox.create({ url: 'http://127.0.0.1:7070', apiKey: process.env.CONCH_API_KEY })
 * await using sh = await sb.shell()
 * await sh.run('cd /tmp')
 * console.log((await sh.run('pwd')).stdout) // "/tmp\n"
 * ```
 */
export class Sandbox {
  /** Sandbox id (`sb_...`). */
  readonly id: string
  /** The sandbox's files. */
  readonly files: SandboxFiles
  /** What the runner last reported about the sandbox. */
  info: SandboxInfo
  readonly #http: HttpClient
  readonly #secret: string
  readonly #options: ConnectOptions
  readonly #path: string
  readonly #owned: boolean
  readonly #shells = new Set<Shell>()
  #WebSocket: Promise<WebSocketConstructor> | undefined

  private constructor(resolved: Resolved, info: SandboxInfo, owned: boolean) {
    this.id = info.id
    this.info = info
    this.#http = resolved.http
    this.#secret = resolved.secret
    this.#options = resolved.options
    this.#owned = owned
    this.#path = `/v1/sandboxes/${encodeURIComponent(info.id)}`
    this.files = new SandboxFiles(this.#http, this.#path)
  }

  /**
   * Creates a sandbox. Disposing the returned object (`await using`) destroys it.
   *
   * @example
   * ```ts
   * const sb = await Sandbox.create({ url, apiKey, env: { CI: '1' }, idleTimeoutMs: 600_000 })
   * ```
   */
  static async create(options: CreateSandboxOptions): Promise<Sandbox> {
    const resolved = resolve(options)
    const info = await resolved.http.json('POST', '/v1/sandboxes', sandboxInfo, {
      json: {
        driver: options.driver,
        host: options.host,
        env: options.env,
        limits: options.limits,
        idleTimeoutMs: options.idleTimeoutMs,
        hibernateAfterMs: options.hibernateAfterMs,
        sessionIdleTimeoutMs: options.sessionIdleTimeoutMs,
        metadata: options.metadata,
        fromSnapshot: options.fromSnapshot,
        restartProcesses: options.restartProcesses,
        network: options.network,
      },
      timeoutMs: Math.max(resolved.http.requestTimeoutMs, 60_000),
    })
    return new Sandbox(resolved, info, true)
  }

  /**
   * Connects to an existing sandbox by id (with the API key or a token for it). Disposing the
   * returned object closes its shells but leaves the sandbox running.
   *
   * @example
   * ```ts
   * const sb = await Sandbox.connect('sb_0123456789ab', { url, token })
   * ```
   */
  static async connect(id: string, options: ConnectOptions): Promise<Sandbox> {
    const resolved = resolve(options)
    const info = await resolved.http.json('GET', `/v1/sandboxes/${encodeURIComponent(id)}`, sandboxInfo)
    return new Sandbox(resolved, info, false)
  }

  /**
   * Lists the runner's sandboxes (needs the API key).
   *
   * @example
   * ```ts
   * for (const info of await Sandbox.list({ url, apiKey })) console.log(info.id, info.status)
   * ```
   */
  static async list(options: ConnectOptions): Promise<SandboxInfo[]> {
    return (await resolve(options).http.json('GET', '/v1/sandboxes', sandboxList)).sandboxes
  }

  /**
   * Runs one command in a fresh `bash -c` process (or in a session's shell with `sessionId`)
   * and waits for its result.
   *
   * @example
   * ```ts
   * const { stdout, exitCode } = await sb.exec('ls -la', { cwd: '/workspace' })
   * await sb.exec('pwd', { sessionId: 'build' }) // runs in the "build" session's shell
   * ```
   */
  async exec<E extends OutputEncoding = 'utf8'>(
    command: string,
    options: SandboxExecOptions<E> = {},
  ): Promise<CommandResult<OutputOf<E>>> {
    const binary = options.encoding === 'binary'
    const result = await this.#http.json('POST', `${this.#path}/exec`, runResult, {
      json: {
        command,
        cwd: options.cwd,
        env: options.env,
        ...stdinFields(options.stdin, encodeBase64),
        timeoutMs: options.timeoutMs,
        encoding: binary ? 'base64' : 'utf8',
        sessionId: options.sessionId,
      },
      timeoutMs: commandDeadlineMs(options.timeoutMs, undefined),
      signal: options.signal,
    })
    return fromRunResult(result, binary) as CommandResult<OutputOf<E>>
  }

  /**
   * Creates a new session and opens a shell on it over a WebSocket. Disposing the shell
   * deletes the session.
   *
   * @example
   * ```ts
   * await using sh = await sb.shell({ cwd: '/workspace', env: { DEBUG: '1' }, commandTimeoutMs: 60_000 })
   * ```
   */
  async shell(options: ShellOptions = {}): Promise<Shell> {
    const { onOutput, ...sessionOptions } = options
    const session = await this.createSession(sessionOptions)
    try {
      return await this.#openShell(session, true, undefined, onOutput)
    } catch (err) {
      await session.delete().catch(() => {})
      throw err
    }
  }

  /**
   * Opens a shell on an existing session, from this or any other process. With `offset`, the
   * output since that log offset is replayed first (to `onOutput`).
   *
   * @example
   * ```ts
   * const sh = await sb.reattachShell('build', { offset: 0, onOutput: (o) => log(o.data) })
   * ```
   */
  async reattachShell(sessionId: string, options: ReattachOptions = {}): Promise<Shell> {
    const info = await this.#http.json(
      'GET',
      `${this.#path}/sessions/${encodeURIComponent(sessionId)}`,
      sessionInfo,
    )
    return this.#openShell(new Session(this.#http, this.#path, info), false, options.offset, options.onOutput)
  }

  /**
   * Creates a session (a new long-lived bash) driven over REST.
   *
   * @example
   * ```ts
   * const build = await sb.createSession({ id: 'build', cwd: '/workspace/app' })
   * await build.exec('npm run build')
   * ```
   */
  async createSession(options: SessionOptions = {}): Promise<Session> {
    const info = await this.#http.json('POST', `${this.#path}/sessions`, sessionInfo, { json: options })
    return new Session(this.#http, this.#path, info)
  }

  /** A handle on an existing session. */
  async getSession(sessionId: string): Promise<Session> {
    const info = await this.#http.json(
      'GET',
      `${this.#path}/sessions/${encodeURIComponent(sessionId)}`,
      sessionInfo,
    )
    return new Session(this.#http, this.#path, info)
  }

  /**
   * Lists the sandbox's sessions.
   *
   * @example
   * ```ts
   * const open = (await sb.listSessions()).filter((s) => s.status === 'open')
   * ```
   */
  async listSessions(): Promise<SessionInfo[]> {
    return (await this.#http.json('GET', `${this.#path}/sessions`, sessionList)).sessions
  }

  /** Deletes a session and kills its bash. */
  async deleteSession(sessionId: string): Promise<void> {
    await this.#http.json('DELETE', `${this.#path}/sessions/${encodeURIComponent(sessionId)}`, okBody)
  }

  /**
   * Starts a background process.
   *
   * @example
   * ```ts
   * const p = await sb.startProcess('node server.js', { cwd: '/workspace/app', env: { PORT: '3000' } })
   * ```
   */
  async startProcess(command: string, options: StartProcessOptions = {}): Promise<BackgroundProcess> {
    const info = await this.#http.json('POST', `${this.#path}/processes`, processInfo, {
      json: { command, ...options },
    })
    return new BackgroundProcess(this.#http, this.#path, info)
  }

  /** Lists the sandbox's background processes. */
  async listProcesses(): Promise<BackgroundProcess[]> {
    const { processes } = await this.#http.json('GET', `${this.#path}/processes`, processList)
    return processes.map((info: ProcessInfo) => new BackgroundProcess(this.#http, this.#path, info))
  }

  /** A handle on an existing background process. */
  async getProcess(processId: string): Promise<BackgroundProcess> {
    const info = await this.#http.json(
      'GET',
      `${this.#path}/processes/${encodeURIComponent(processId)}`,
      processInfo,
    )
    return new BackgroundProcess(this.#http, this.#path, info)
  }

  /**
   * Opens a terminal: an interactive bash (or `command`) on a pseudo-terminal in the sandbox,
   * attached over a WebSocket. The terminal outlives this client; others attach by its id.
   *
   * @example
   * ```ts
   * await using term = await sb.terminal({ cols: 100, rows: 30 })
   * term.onData((bytes) => process.stdout.write(bytes))
   * term.write('python3\r')
   * ```
   */
  async terminal(options: TerminalOptions = {}): Promise<Terminal> {
    const info = await this.#http.json('POST', `${this.#path}/terminals`, terminalInfo, { json: options })
    return this.attachTerminal(info.id, { offset: info.startOffset })
  }

  /**
   * Attaches to a terminal by id, replaying its screen from `offset` (default: as far back as
   * the scrollback reaches). Fails with OUTPUT_LOST when `offset` was evicted.
   *
   * @example
   * ```ts
   * const term = await sb.attachTerminal(savedId, { offset: savedOffset })
   * ```
   */
  async attachTerminal(id: string, options: { offset?: number } = {}): Promise<Terminal> {
    const info = await this.#http.json(
      'GET',
      `${this.#path}/terminals/${encodeURIComponent(id)}`,
      terminalInfo,
    )
    this.#WebSocket ??= resolveWebSocket(this.#options.WebSocket)
    const term = new Terminal(
      {
        http: this.#http,
        path: this.#path,
        baseUrl: this.#http.baseUrl,
        secret: this.#secret,
        WebSocket: await this.#WebSocket,
      },
      info,
      options.offset ?? info.startOffset,
    )
    await term.connect()
    return term
  }

  /**
   * The sandbox's terminals, running and ended (until closed).
   *
   * @example
   * ```ts
   * const running = (await sb.listTerminals()).filter((t) => t.exitCode === null)
   * ```
   */
  async listTerminals(): Promise<TerminalInfo[]> {
    return (await this.#http.json('GET', `${this.#path}/terminals`, terminalList)).terminals
  }

  /**
   * Mints a token that grants access to this sandbox only, safe to hand to a browser.
   *
   * @example
   * ```ts
   * const { token } = await sb.createAccessToken({ ttlMs: 15 * 60_000 })
   * // in the browser:
   * const sb = await Sandbox.connect(sandboxId, { url, token })
   * ```
   */
  createAccessToken(options: { ttlMs?: number } = {}): Promise<AccessToken> {
    return this.#http.json('POST', `${this.#path}/tokens`, accessToken, { json: options })
  }

  /**
   * Snapshots the sandbox: its workspace, every open session's shell state (cwd, variables,
   * functions, aliases, options, traps, directory stack, history) and its settings. Runs
   * queued in a session finish first. Fork it with `Sandbox.create({ fromSnapshot })`.
   *
   * @example
   * ```ts
   * const snap = await sb.snapshot({ name: 'before-risky-step' })
   * const retry = await Sandbox.create({ url, apiKey, fromSnapshot: snap.id })
   * ```
   */
  snapshot(options: { name?: string } = {}): Promise<SnapshotInfo> {
    return this.#http.json('POST', `${this.#path}/snapshots`, snapshotInfo, {
      json: options,
      timeoutMs: Math.max(this.#http.requestTimeoutMs, 120_000),
    })
  }

  /**
   * Hibernates the sandbox: snapshots it, then stops everything in it, freeing its memory and
   * processes. It keeps its id and shows `hibernated`; the next request that needs it (a run,
   * an exec, a shell attach) wakes it with its workspace and shells restored and its
   * background processes restarted, and a reattached shell's `resumed` says so.
   *
   * @example
   * ```ts
   * await sb.hibernate()
   * await using sh = await sb.reattachShell('default') // wakes it: same cwd, env, history
   * ```
   */
  async hibernate(): Promise<SandboxInfo> {
    this.#closeShells()
    this.info = await this.#http.json('POST', `${this.#path}/hibernate`, sandboxInfo, {
      timeoutMs: Math.max(this.#http.requestTimeoutMs, 120_000),
    })
    return this.info
  }

  /**
   * Holds the sandbox awake (no idle hibernation or deletion) for `durationMs` from now, for a
   * long job that makes no requests. Each call replaces the previous hold, so calls never add
   * up; a longer duration than the runner's cap (24 hours unless its operator changed it) is
   * lowered to it, and `0` ends the hold. `info.keepAliveUntil` says until when.
   *
   * @example
   * ```ts
   * await sb.keepAlive(2 * 60 * 60_000) // a two-hour build with no client attached
   * ```
   */
  async keepAlive(durationMs: number): Promise<SandboxInfo> {
    this.info = await this.#http.json('POST', `${this.#path}/keep-alive`, sandboxInfo, {
      json: { durationMs },
    })
    return this.info
  }

  /** The snapshots taken of this sandbox, oldest first. */
  async listSnapshots(): Promise<SnapshotInfo[]> {
    return (await this.#http.json('GET', `${this.#path}/snapshots`, snapshotList)).snapshots
  }

  /**
   * Every snapshot on the runner, oldest first (needs the API key).
   *
   * @example
   * ```ts
   * for (const s of await Sandbox.listSnapshots({ url, apiKey })) console.log(s.id, s.name, s.sandboxId)
   * ```
   */
  static async listSnapshots(options: ConnectOptions): Promise<SnapshotInfo[]> {
    return (await resolve(options).http.json('GET', '/v1/snapshots', snapshotList)).snapshots
  }

  /**
   * Deletes a snapshot and the stored data only it used (needs the API key).
   *
   * @example
   * ```ts
   * await Sandbox.deleteSnapshot(snap.id, { url, apiKey })
   * ```
   */
  static async deleteSnapshot(snapshotId: string, options: ConnectOptions): Promise<void> {
    await resolve(options).http.json('DELETE', `/v1/snapshots/${encodeURIComponent(snapshotId)}`, okBody)
  }

  /**
   * Exposes a sandbox port to browsers: the runner relays HTTP, WebSocket and SSE to
   * 127.0.0.1:`port` inside. `url` carries a token for this port only.
   *
   * @example
   * ```ts
   * await sb.startProcess('python3 -m http.server 3000')
   * const { url, expiresAt } = await sb.exposePort(3000)
   * console.log(`open ${url} before ${new Date(expiresAt)}`)
   * ```
   */
  async exposePort(port: number, options: ExposePortOptions = {}): Promise<ExposedPort & { url: string }> {
    const exposed = await this.#http.json('POST', `${this.#path}/exposed-ports/${port}`, exposedPort, {
      json: options,
    })
    return { ...exposed, url: exposed.previewUrl ?? `${this.#http.baseUrl}${exposed.path}` }
  }

  /**
   * Ends a port's exposure: every token minted for it, and public access, stop working at once.
   * Exposed ports count against the runner's per-sandbox limit (`TOO_MANY_EXPOSED_PORTS`) until
   * they expire or are unexposed.
   *
   * @example
   * ```ts
   * await sb.unexposePort(3000)
   * ```
   */
  async unexposePort(port: number): Promise<void> {
    await this.#http.json('DELETE', `${this.#path}/exposed-ports/${port}`, okBody)
  }

  /**
   * The runner URL of `path` on a sandbox port, for clients that send a credential in `Authorization`.
   *
   * @example
   * ```ts
   * const res = await fetch(sb.portUrl(3000, '/health'), { headers: { authorization: `Bearer ${apiKey}` } })
   * ```
   */
  portUrl(port: number, path = '/'): string {
    return `${this.#http.baseUrl}${this.#path}/ports/${port}${path.startsWith('/') ? path : `/${path}`}`
  }

  /**
   * The TCP ports servers listen on inside the sandbox, read from its own network namespace.
   *
   * @example
   * ```ts
   * const ports = await sb.ports()
   * if (ports.some((p) => p.port === 3000)) console.log(await sb.exposePort(3000))
   * ```
   */
  async ports(): Promise<ListeningPort[]> {
    return (await this.#http.json('GET', `${this.#path}/ports`, portList)).ports
  }

  /**
   * `port_opened` for every open port, then `port_opened`/`port_closed` as servers start and stop.
   *
   * @example
   * ```ts
   * const abort = new AbortController()
   * for await (const ev of sb.watchPorts({ signal: abort.signal })) {
   *   if (ev.type === 'port_opened' && ev.port === 3000) break
   * }
   * ```
   */
  async *watchPorts(options: { signal?: AbortSignal } = {}): AsyncGenerator<PortEvent> {
    const response = await this.#http.open(
      'GET',
      `${this.#path}/port-events`,
      { signal: options.signal },
      'application/x-ndjson',
    )
    if (!response.body) return
    for await (const line of ndjsonLines(response.body)) yield portEvent(line, 'port event')
  }

  /** Fetches the sandbox's current state. */
  async refresh(): Promise<SandboxInfo> {
    this.info = await this.#http.json('GET', this.#path, sandboxInfo)
    return this.info
  }

  /**
   * Destroys the sandbox and everything in it: sessions, processes, files.
   *
   * @example
   * ```ts
   * await sb.destroy()
   * ```
   */
  async destroy(): Promise<void> {
    this.#closeShells()
    await this.#http.json('DELETE', this.#path, okBody, {
      timeoutMs: Math.max(this.#http.requestTimeoutMs, 60_000),
    })
  }

  /** Destroys a sandbox made by `Sandbox.create`; for one from `connect`, closes its shells. */
  async [asyncDispose](): Promise<void> {
    if (!this.#owned) {
      this.#closeShells()
      return
    }
    await this.destroy().catch((err: unknown) => {
      if (!(err instanceof ConchError) || err.code !== 'SANDBOX_NOT_FOUND') throw err
    })
  }

  #closeShells(): void {
    for (const sh of this.#shells) sh.close()
    this.#shells.clear()
  }

  async #openShell(
    session: Session,
    owned: boolean,
    offset: number | undefined,
    onOutput: ((output: ShellOutput) => void) | undefined,
  ): Promise<Shell> {
    this.#WebSocket ??= resolveWebSocket(this.#options.WebSocket)
    const shell: Shell = new Shell({
      session,
      sandboxId: this.id,
      baseUrl: this.#http.baseUrl,
      secret: this.#secret,
      WebSocket: await this.#WebSocket,
      policy: { ...DEFAULT_CONNECTION_POLICY, ...this.#options.connection },
      maxOutputBytes: this.#options.maxOutputBytes ?? LIMITS.outputCapBytes,
      owned,
      offset,
      onOutput,
      onClose: () => this.#shells.delete(shell),
    })
    this.#shells.add(shell)
    await shell.open()
    return shell
  }
}
