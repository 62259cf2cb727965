import { BEARER_SUBPROTOCOL_PREFIX, LIMITS, SHELL_SUBPROTOCOL } from '@conch/protocol'
import { asyncDispose } from './async-dispose.ts'
import type { CommandResult, OutputEncoding } from './command-result.ts'
import { type ConchError, ConchError as ConchErrorClass, ConnectionError } from './conch-error.ts'
import { OutputFlow } from './output-flow.ts'
import { type PipedRun, withStdin } from './piped-run.ts'
import type { HistoryEntry, SessionInfo } from './resource-info.ts'
import { RunLedger } from './run-ledger.ts'
import type { HistoryQuery, Session } from './session.ts'
import type { SessionAliases } from './session-aliases.ts'
import type { SessionEnv } from './session-env.ts'
import { type ConnectionPolicy, ShellConnection } from './shell-connection.ts'
import { CLIENT_HELLO, ShellFrameRouter, type ShellResumed } from './shell-frame-router.ts'
import { ShellResume } from './shell-resume.ts'
import {
  type ShellEvent,
  type ShellOutput,
  type ShellRunOptions,
  type StartOptions,
  toStartOptions,
} from './shell-run-options.ts'
import { streamRun } from './shell-stream.ts'
import type { WebSocketConstructor } from './web-socket-like.ts'

// A shell is one session's bash seen through a WebSocket; this file is its public surface.
// Runs are sent the moment they are called (pipelined) and matched to frames by run id
// (run-ledger.ts); the runner executes them FIFO. Frames are routed by shell-frame-router.ts.
// The shell tracks the log offset of the last output it has seen, so after a drop the
// connection resumes from it and the in-flight run completes as if nothing happened
// (shell-resume.ts). Output a consumer has not taken yet is held, and only consumed output is
// acknowledged (`output_ack`, output-flow.ts), so a slow consumer slows the command.
// `stream` is a run as an async iterator (shell-stream.ts); a run with `stdin: 'pipe'` gets
// its `write` and `end` in piped-run.ts.

/** The options of a run called without any: made once, read only. */
const NO_OPTIONS: StartOptions = Object.freeze(toStartOptions({}))

/** What a shell needs from its sandbox. @internal */
export interface ShellInit {
  session: Session
  sandboxId: string
  baseUrl: string
  secret: string
  WebSocket: WebSocketConstructor
  policy: ConnectionPolicy
  maxOutputBytes: number
  owned: boolean
  offset: number | undefined
  onOutput: ((output: ShellOutput) => void) | undefined
  onClose: (() => void) | undefined
}

/**
 * A live bash session over a WebSocket. `run` executes in the same bash every time, so `cd`,
 * `export` and functions persist. Concurrent runs are pipelined and execute in call order.
 * Dispose it (`await using`) to close the socket; a shell made by `sb.shell()` also deletes
 * its session then, while one from `sb.reattachShell()` leaves the session running.
 *
 * @example
 * ```ts
 * await using sh = await sb.shell({ cwd: '/workspace' })
 * await sh.run('cd /tmp && export A=1')
 * const { stdout } = await sh.run('echo "$PWD $A"') // "/tmp 1\n"
 * ```
 */
export class Shell {
  /** The session id; any authorised client can reattach with it. */
  readonly sessionId: string
  /** The sandbox the shell runs in. */
  readonly sandboxId: string
  /** The shell's exported variables. */
  readonly env: SessionEnv
  /** The shell's aliases. */
  readonly aliases: SessionAliases
  readonly #session: Session
  readonly #conn: ShellConnection
  readonly #owned: boolean
  readonly #onClose: (() => void) | undefined
  readonly #flow = new OutputFlow(LIMITS.clientWindowBytes, (offset) => {
    this.#conn.send(`{"type":"ack","offset":${offset}}`)
  })
  readonly #ledger: RunLedger
  readonly #resume: ShellResume
  #closedError: ConchError | null = null
  readonly #frames: ShellFrameRouter

  /** @internal Use `sb.shell()` or `sb.reattachShell()`. */
  constructor(init: ShellInit) {
    this.#session = init.session
    this.sessionId = init.session.id
    this.sandboxId = init.sandboxId
    this.env = init.session.env
    this.aliases = init.session.aliases
    this.#owned = init.owned
    this.#onClose = init.onClose
    const send = (frame: string): boolean => this.#conn.send(frame)
    this.#ledger = new RunLedger({
      sessionId: this.sessionId,
      maxOutputBytes: init.maxOutputBytes,
      graceMs: init.policy.runDeadlineGraceMs,
      flow: this.#flow,
      send,
      canSend: () => this.#resume.canSend,
      sessionTimeoutMs: () => this.#session.info.commandTimeoutMs,
    })
    this.#resume = new ShellResume(
      {
        ledger: this.#ledger,
        refresh: () => this.#session.refresh(),
        send,
        fail: (err) => this.#closeAll(asConchError(err)),
        closed: () => this.#closedError !== null,
      },
      init.offset,
    )
    this.#frames = new ShellFrameRouter({
      sessionId: this.sessionId,
      sandboxId: this.sandboxId,
      ledger: this.#ledger,
      resume: this.#resume,
      flow: this.#flow,
      onOutput: init.onOutput,
      close: (error) => this.#closeAll(error),
    })
    const wsBase = init.baseUrl.replace(/^http/, 'ws')
    const path = `/v1/sandboxes/${encodeURIComponent(init.sandboxId)}/shell`
    this.#conn = new ShellConnection({
      WebSocket: init.WebSocket,
      protocols: [SHELL_SUBPROTOCOL, BEARER_SUBPROTOCOL_PREFIX + init.secret],
      urlFor: () => {
        const from = this.#resume.resumeFrom
        const offset = from === null ? '' : `&offset=${from}`
        return `${wsBase}${path}?sessionId=${encodeURIComponent(this.sessionId)}&encoding=base64${offset}`
      },
      policy: init.policy,
      events: {
        onFrame: (frame) => this.#frames.frame(frame),
        onOutput: (frame) => this.#frames.output(frame.stream, frame.id, frame.data, frame.offset),
        onBadFrame: (message) =>
          this.#closeAll(
            new ConchErrorClass(
              'INVALID_FRAME',
              `shell ${this.sessionId}: the runner sent a frame this SDK cannot read (${message}); ` +
                'the runner and @conch/sdk are probably incompatible versions',
            ),
          ),
        onOpen: () => {
          this.#resume.opened()
          this.#conn.send(CLIENT_HELLO)
        },
        onDrop: () => this.#resume.dropped(),
        onGiveUp: (error) => this.#closeAll(asConchError(error)),
        diagnose: () =>
          this.#session.refresh().then(
            () => undefined,
            (err: unknown) =>
              err instanceof ConnectionError || !(err instanceof ConchErrorClass) ? undefined : err,
          ),
      },
    })
  }

  /** @internal Opens the socket and waits until the attach (and any replay) is complete. */
  async open(): Promise<this> {
    const attached = this.#frames.attached()
    try {
      await this.#conn.start()
    } catch (err) {
      this.#frames.forgetAttach()
      const fatal = await this.#session.refresh().then(
        () => undefined,
        (e: unknown) => e,
      )
      const error = asConchError(fatal ?? err)
      this.#closeAll(error)
      throw error
    }
    try {
      await attached
    } catch (err) {
      this.#closeAll(asConchError(err))
      throw err
    }
    return this
  }

  /**
   * Set when this session was restored from a snapshot (`Sandbox.create({ fromSnapshot })`):
   * its cwd, variables, functions and history came back, but its processes were restarted,
   * not continued. Null for a session that never went through a snapshot.
   *
   * @example
   * ```ts
   * const sh = await fork.reattachShell('default')
   * if (sh.resumed) console.log(`restored from ${sh.resumed.snapshotId}; restart your dev server`)
   * ```
   */
  get resumed(): ShellResumed | null {
    return this.#frames.resumed
  }

  /** True until bash ends or the shell is closed. */
  get isOpen(): boolean {
    return this.#closedError === null
  }

  /**
   * The session log offset after the last output byte this shell has seen. Another process can
   * pick up from here with `sb.reattachShell(sh.sessionId, { offset: sh.offset })`.
   *
   * @example
   * ```ts
   * saveCheckpoint({ sessionId: sh.sessionId, offset: sh.offset })
   * ```
   */
  get offset(): number {
    return this.#resume.offset
  }

  /**
   * Output bytes this shell has received that a `stream()` reader or a callback's promise has
   * not taken yet. A runner with `output_ack` keeps it within about two windows
   * (`LIMITS.clientWindowBytes` plus the agent's channel window).
   */
  get bufferedBytes(): number {
    return this.#flow.heldBytes
  }

  /** What the runner last reported about the session. */
  get info(): SessionInfo {
    return this.#session.info
  }

  /**
   * Runs a command in the shell and resolves with its result, whatever the exit code. A
   * timeout resolves with `timedOut: true` and the partial output; the shell stays usable.
   *
   * @example
   * ```ts
   * const r = await sh.run('make test', { timeoutMs: 120_000, onStdout: (s) => process.stdout.write(s) })
   * if (r.exitCode !== 0) console.log(r.stderr)
   * const png = await sh.run('cat logo.png', { encoding: 'binary' }) // png.stdout is a Uint8Array
   * ```
   */
  run(
    command: string,
    options: ShellRunOptions<'binary'> & { encoding: 'binary'; stdin: 'pipe' },
  ): PipedRun<Uint8Array>
  run(command: string, options: ShellRunOptions<'utf8'> & { stdin: 'pipe' }): PipedRun<string>
  run(
    command: string,
    options: ShellRunOptions<'binary'> & { encoding: 'binary' },
  ): Promise<CommandResult<Uint8Array>>
  run(command: string, options?: ShellRunOptions<'utf8'>): Promise<CommandResult<string>>
  run(
    command: string,
    options?: ShellRunOptions<'binary'> | ShellRunOptions<'utf8'>,
  ): Promise<CommandResult<string> | CommandResult<Uint8Array>> {
    if (options === undefined)
      return this.#start(command, NO_OPTIONS, true).promise as Promise<CommandResult<string>>
    const started = this.#start(command, toStartOptions(options), true)
    const promise = started.promise as Promise<CommandResult<string> | CommandResult<Uint8Array>>
    if (options.stdin !== 'pipe') return promise
    return withStdin(promise, this.#ledger, started.id)
  }

  /**
   * Runs a command and yields its output as it arrives, then one `exit` event. Breaking out of
   * the loop interrupts the command.
   *
   * @example
   * ```ts
   * for await (const ev of sh.stream('npm install')) {
   *   if (ev.type === 'exit') console.log('exit', ev.exitCode)
   *   else process.stdout.write(ev.data)
   * }
   * ```
   */
  stream(
    command: string,
    options: Omit<ShellRunOptions<'binary'>, 'onStdout' | 'onStderr'> & { encoding: 'binary' },
  ): AsyncIterableIterator<ShellEvent<Uint8Array>>
  stream(
    command: string,
    options?: Omit<ShellRunOptions<'utf8'>, 'onStdout' | 'onStderr'>,
  ): AsyncIterableIterator<ShellEvent<string>>
  stream(
    command: string,
    options: Omit<ShellRunOptions<OutputEncoding>, 'onStdout' | 'onStderr'> = {},
  ): AsyncIterableIterator<ShellEvent<string | Uint8Array>> {
    return streamRun(this.#ledger, this.#conn, this.#closedError, command, options)
  }

  /**
   * Ctrl-C for the running command: SIGINT to it (and to a builtin loop in bash). The run
   * resolves with the command's exit code, typically 130.
   *
   * @example
   * ```ts
   * const pending = sh.run('sleep 100')
   * await sh.interrupt()
   * const { exitCode } = await pending // 130
   * ```
   */
  async interrupt(): Promise<void> {
    this.#throwIfClosed()
    if (!this.#conn.send('{"type":"shell_interrupt"}')) await this.#session.interrupt()
  }

  /**
   * Searches the commands run in this shell.
   *
   * @example
   * ```ts
   * const entries = await sh.history({ contains: 'git' })
   * ```
   */
  history(query: HistoryQuery = {}): Promise<HistoryEntry[]> {
    return this.#session.history(query)
  }

  /** Runs history entry `index` again (over REST) and returns its new result. */
  replay(index: number): Promise<CommandResult> {
    return this.#session.replay(index)
  }

  /**
   * Closes the socket. The session and its bash keep running; reattach with
   * `sb.reattachShell(sh.sessionId)`. Pending runs reject with `ConnectionError`.
   */
  close(): void {
    if (this.#closedError) return
    this.#closeAll(
      new ConnectionError(
        `shell ${this.sessionId} was closed by this client; reattach to see pending runs finish`,
      ),
    )
  }

  /**
   * Closes the socket and, for a shell made by `sb.shell()`, deletes its session. A session or
   * sandbox that is already gone counts as deleted, so disposal order does not matter.
   */
  async [asyncDispose](): Promise<void> {
    this.close()
    if (this.#owned) {
      await this.#session.delete().catch((err: unknown) => {
        const gone =
          err instanceof ConchErrorClass &&
          (err.code === 'SESSION_NOT_FOUND' || err.code === 'SANDBOX_NOT_FOUND')
        if (!gone) throw err
      })
    }
  }

  #start(
    command: string,
    options: StartOptions,
    keep: boolean,
  ): { id: string; promise: Promise<CommandResult<string | Uint8Array>> } {
    return this.#ledger.start(command, options, keep, this.#closedError)
  }

  #closeAll(error: ConchError): void {
    if (this.#closedError) return
    this.#closedError = error
    this.#conn.close()
    this.#frames.failAttach(error)
    this.#ledger.failAll(error)
    this.#resume.dropped()
    this.#onClose?.()
  }

  #throwIfClosed(): void {
    if (this.#closedError) throw this.#closedError
  }
}

function asConchError(err: unknown): ConchError {
  if (err instanceof ConchErrorClass) return err
  return new ConnectionError(
    `the shell connection failed: ${err instanceof Error ? err.message : String(err)}`,
    {
      cause: err,
    },
  )
}
