// The sandbox handle: its public methods, with their documentation, each delegating to the
// module that implements one concept (sessions and shells, processes, terminals, ports, ...)
// through the handle's shared context.
import { asyncDispose } from './async-dispose.ts'
import type { BackgroundProcess } from './background-process.ts'
import type { CommandResult, OutputEncoding, OutputOf } from './command-result.ts'
import { ConchError } from './conch-error.ts'
import type {
  AccessToken,
  ExposedPort,
  ListeningPort,
  PortEvent,
  SandboxInfo,
  SessionInfo,
  SnapshotInfo,
} from './resource-info.ts'
import { connectRunner, type RunnerConnection } from './runner-connection.ts'
import { createAccessToken } from './sandbox-access-tokens.ts'
import { type SandboxContext, sandboxContext } from './sandbox-context.ts'
import { execInSandbox } from './sandbox-exec.ts'
import { SandboxFiles } from './sandbox-files.ts'
import { createSandbox, destroySandbox, fetchSandbox, listSandboxes } from './sandbox-lifecycle.ts'
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
import { exposePort, listPorts, portUrl, unexposePort, watchPorts } from './sandbox-ports.ts'
import { getProcess, listProcesses, startProcess } from './sandbox-processes.ts'
import {
  closeShells,
  createSession,
  deleteSession,
  getSession,
  listSessions,
  openShell,
  reattachShell,
} from './sandbox-sessions.ts'
import {
  deleteSnapshot,
  hibernate,
  keepAlive,
  listRunnerSnapshots,
  listSandboxSnapshots,
  takeSnapshot,
} from './sandbox-snapshots.ts'
import { attachTerminal, listTerminals, openTerminal } from './sandbox-terminals.ts'
import type { Session } from './session.ts'
import type { Shell } from './shell.ts'
import type { Terminal, TerminalInfo, TerminalOptions } from './terminal.ts'

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
  readonly #ctx: SandboxContext
  readonly #owned: boolean

  private constructor(runner: RunnerConnection, info: SandboxInfo, owned: boolean) {
    this.id = info.id
    this.info = info
    this.#owned = owned
    this.#ctx = sandboxContext(runner, info.id)
    this.files = new SandboxFiles(this.#ctx.http, this.#ctx.path)
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
    const runner = connectRunner(options)
    return new Sandbox(runner, await createSandbox(runner, options), true)
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
    const runner = connectRunner(options)
    return new Sandbox(runner, await fetchSandbox(runner, id), false)
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
    return listSandboxes(connectRunner(options))
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
    return execInSandbox(this.#ctx, command, options)
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
    return openShell(this.#ctx, options)
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
    return reattachShell(this.#ctx, sessionId, options)
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
    return createSession(this.#ctx, options)
  }

  /** A handle on an existing session. */
  async getSession(sessionId: string): Promise<Session> {
    return getSession(this.#ctx, sessionId)
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
    return listSessions(this.#ctx)
  }

  /** Deletes a session and kills its bash. */
  async deleteSession(sessionId: string): Promise<void> {
    return deleteSession(this.#ctx, sessionId)
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
    return startProcess(this.#ctx, command, options)
  }

  /** Lists the sandbox's background processes. */
  async listProcesses(): Promise<BackgroundProcess[]> {
    return listProcesses(this.#ctx)
  }

  /** A handle on an existing background process. */
  async getProcess(processId: string): Promise<BackgroundProcess> {
    return getProcess(this.#ctx, processId)
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
    return openTerminal(this.#ctx, options)
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
    return attachTerminal(this.#ctx, id, options)
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
    return listTerminals(this.#ctx)
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
    return createAccessToken(this.#ctx, options)
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
    return takeSnapshot(this.#ctx, options)
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
    this.info = await hibernate(this.#ctx)
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
    this.info = await keepAlive(this.#ctx, durationMs)
    return this.info
  }

  /** The snapshots taken of this sandbox, oldest first. */
  async listSnapshots(): Promise<SnapshotInfo[]> {
    return listSandboxSnapshots(this.#ctx)
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
    return listRunnerSnapshots(connectRunner(options))
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
    return deleteSnapshot(connectRunner(options), snapshotId)
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
    return exposePort(this.#ctx, port, options)
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
    return unexposePort(this.#ctx, port)
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
    return portUrl(this.#ctx, port, path)
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
    return listPorts(this.#ctx)
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
    yield* watchPorts(this.#ctx, options)
  }

  /** Fetches the sandbox's current state. */
  async refresh(): Promise<SandboxInfo> {
    this.info = await fetchSandbox(this.#ctx, this.id)
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
    return destroySandbox(this.#ctx)
  }

  /** Destroys a sandbox made by `Sandbox.create`; for one from `connect`, closes its shells. */
  async [asyncDispose](): Promise<void> {
    if (!this.#owned) {
      closeShells(this.#ctx)
      return
    }
    await this.destroy().catch((err: unknown) => {
      if (!(err instanceof ConchError) || err.code !== 'SANDBOX_NOT_FOUND') throw err
    })
  }
}
