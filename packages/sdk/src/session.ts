import { encodeBase64 } from './base64.ts'
import { type CommandResult, fromRunResult, type OutputEncoding, type OutputOf } from './command-result.ts'
import type { HttpClient } from './http-client.ts'
import type { HistoryEntry, SessionInfo } from './resource-info.ts'
import { historyList, okBody, runResult, sessionInfo } from './rest-shapes.ts'
import { commandDeadlineMs, stdinFields } from './run-budget.ts'
import { SessionAliases } from './session-aliases.ts'
import { SessionEnv } from './session-env.ts'

/**
 * Options of a buffered command run over REST.
 *
 * @example
 * ```ts
 * const r = await build.exec('cat', { stdin: 'hello', timeoutMs: 5_000 })
 * ```
 */
export interface ExecOptions<E extends OutputEncoding = 'utf8'> {
  /** Timeout; the runner clamps it between 1 s and its maximum. */
  timeoutMs?: number
  /** Data for the command's stdin; without it stdin is /dev/null. */
  stdin?: string | Uint8Array
  /** `utf8` text (default) or `binary` bytes. */
  encoding?: E
  /** Aborts the wait (the command keeps running; interrupt it to stop it). */
  signal?: AbortSignal
}

/**
 * A query over a session's history.
 *
 * @example
 * ```ts
 * const last = await sh.history({ contains: 'npm', limit: 5 })
 * ```
 */
export interface HistoryQuery {
  /** Keep commands that contain this text. */
  contains?: string
  /** Keep commands that start with this text. */
  prefix?: string
  /** At most this many entries, newest last. */
  limit?: number
}

/**
 * A named session: one long-lived bash in the sandbox, driven over REST. State persists
 * between calls. For streaming, pipelined runs use `sb.reattachShell(session.id)`.
 *
 * @example
 * ```ts
 * const build = await sb.createSession({ id: 'build', cwd: '/workspace/app' })
 * await build.exec('npm ci')
 * const { exitCode } = await build.exec('npm run build')
 * ```
 */
export class Session {
  /** Session id. */
  readonly id: string
  /** The session's exported variables. */
  readonly env: SessionEnv
  /** The session's aliases. */
  readonly aliases: SessionAliases
  /** What the runner last reported about the session. */
  info: SessionInfo
  readonly #http: HttpClient
  readonly #path: string

  /** @internal */
  constructor(http: HttpClient, sandboxPath: string, info: SessionInfo) {
    this.id = info.id
    this.info = info
    this.#http = http
    this.#path = `${sandboxPath}/sessions/${encodeURIComponent(info.id)}`
    this.env = new SessionEnv(http, this.#path)
    this.aliases = new SessionAliases(http, this.#path)
  }

  /**
   * Runs a command in this session's shell and waits for its result.
   *
   * @example
   * ```ts
   * await build.exec('cd src')
   * const { stdout } = await build.exec('pwd') // .../src
   * ```
   */
  async exec<E extends OutputEncoding = 'utf8'>(
    command: string,
    options: ExecOptions<E> = {},
  ): Promise<CommandResult<OutputOf<E>>> {
    const binary = options.encoding === 'binary'
    const result = await this.#http.json('POST', `${this.#path}/run`, runResult, {
      json: {
        command,
        timeoutMs: options.timeoutMs,
        ...stdinFields(options.stdin, encodeBase64),
        encoding: binary ? 'base64' : 'utf8',
      },
      timeoutMs: commandDeadlineMs(options.timeoutMs, this.info.commandTimeoutMs),
      signal: options.signal,
    })
    return fromRunResult(result, binary) as CommandResult<OutputOf<E>>
  }

  /** Ctrl-C for the command running in this session, if any. */
  async interrupt(): Promise<void> {
    await this.#http.json('POST', `${this.#path}/interrupt`, okBody)
  }

  /**
   * Searches the commands run in this session.
   *
   * @example
   * ```ts
   * const gitCommands = await build.history({ prefix: 'git ' })
   * ```
   */
  async history(query: HistoryQuery = {}): Promise<HistoryEntry[]> {
    const { entries } = await this.#http.json('GET', `${this.#path}/history`, historyList, {
      query: { ...query },
    })
    return entries
  }

  /** Runs history entry `index` again and returns its new result. */
  async replay(index: number): Promise<CommandResult> {
    const result = await this.#http.json('POST', `${this.#path}/history/${index}/replay`, runResult, {
      timeoutMs: commandDeadlineMs(undefined, this.info.commandTimeoutMs),
    })
    return fromRunResult(result, false) as CommandResult
  }

  /** Fetches the session's current state. */
  async refresh(): Promise<SessionInfo> {
    this.info = await this.#http.json('GET', this.#path, sessionInfo)
    return this.info
  }

  /** Deletes the session and kills its bash. */
  async delete(): Promise<void> {
    await this.#http.json('DELETE', this.#path, okBody)
  }
}
