import { BEARER_SUBPROTOCOL_PREFIX, LIMITS, type PROTOCOL_VERSION, SHELL_SUBPROTOCOL } from '@conch/protocol'
import { asyncDispose } from './async-dispose.ts'
import { AsyncQueue } from './async-queue.ts'
import { decodeBase64, encodeBase64 } from './base64.ts'
import type { CommandResult, OutputEncoding, OutputOf } from './command-result.ts'
import {
  type ConchError,
  ConchError as ConchErrorClass,
  ConnectionError,
  DeadlineError,
  OutputLostError,
  ShellClosedError,
} from './conch-error.ts'
import { errorFromWire } from './error-from-wire.ts'
import { OutputBuffer } from './output-buffer.ts'
import { OutputFlow } from './output-flow.ts'
import type { HistoryEntry, SessionInfo } from './resource-info.ts'
import { commandDeadlineMs, stdinFields } from './run-budget.ts'
import type { IncomingFrame } from './server-frame.ts'
import type { HistoryQuery, Session } from './session.ts'
import type { SessionAliases } from './session-aliases.ts'
import type { SessionEnv } from './session-env.ts'
import { type ConnectionPolicy, ShellConnection } from './shell-connection.ts'
import type { WebSocketConstructor } from './web-socket-like.ts'

// A shell is one session's bash seen through a WebSocket. Runs are sent the moment they are
// called (pipelined) and matched to frames by run id; the runner executes them FIFO. The
// shell tracks the byte offset of the last output it has seen, so when the socket drops the
// connection reconnects with `?offset=` and the replay completes the in-flight run as if
// nothing happened. Runs that were sent but not seen to start are reconciled after a
// reconnect: the shell asks the runner whether its queue is empty and, if so, sends them again
// (they never arrived). Output is carried as binary frames (base64 in JSON from a runner
// without `binary_output`) and kept as bytes; text is decoded once at
// the end for the result, and with a streaming decoder per stream for callbacks, so a
// multi-byte character split across frames arrives whole. Output a consumer has not taken yet
// (a `stream()` reader behind, a callback's promise pending) is held, and the shell acknowledges
// only what was consumed (`output_ack`), so a slow consumer slows the command.

const SDK_PROTOCOL_VERSION: typeof PROTOCOL_VERSION = 1
const CLIENT_HELLO = JSON.stringify({
  type: 'hello',
  protocolVersion: SDK_PROTOCOL_VERSION,
  capabilities: [
    'shell',
    'reattach',
    'interrupt',
    'stdin',
    'base64',
    'heartbeat',
    'pipelining',
    'output_ack',
    'binary_output',
  ],
})
const EMPTY = new Uint8Array(0)
const textDecoder = new TextDecoder()
const textEncoder = new TextEncoder()

/**
 * Options of one `sh.run`.
 *
 * @example
 * ```ts
 * const ac = new AbortController()
 * const r = await sh.run('npm test', { timeoutMs: 60_000, signal: ac.signal, onStdout: (s) => ui.append(s) })
 * ```
 */
export interface ShellRunOptions<E extends OutputEncoding = 'utf8'> {
  /** Timeout; the runner clamps it between 1 s and its maximum. Default: the session's. */
  timeoutMs?: number
  /** Data for the command's stdin; without it stdin is /dev/null. */
  stdin?: string | Uint8Array
  /** Aborts the run: it is interrupted (Ctrl-C) and the call rejects with the signal's reason. */
  signal?: AbortSignal
  /** `utf8` text (default) or `binary` bytes, lossless. */
  encoding?: E
  /**
   * Called with each stdout chunk as it arrives (whole characters in text mode). A returned
   * promise holds back later chunks, and the command with them, until it settles.
   */
  onStdout?: (chunk: OutputOf<E>) => unknown
  /** Called with each stderr chunk as it arrives; a returned promise holds back later chunks. */
  onStderr?: (chunk: OutputOf<E>) => unknown
}

/**
 * One event of `sh.stream`: output chunks in arrival order, then exactly one `exit`.
 *
 * @example
 * ```ts
 * for await (const ev of sh.stream('make')) {
 *   if (ev.type === 'exit') console.log('exit', ev.code)
 *   else process.stdout.write(ev.data)
 * }
 * ```
 */
export type ShellEvent<T extends string | Uint8Array = string> =
  | { type: 'stdout'; data: T }
  | { type: 'stderr'; data: T }
  | { type: 'exit'; code: number; timedOut: boolean; oomKilled: boolean; durationMs: number }

/**
 * Output on the shell that no run of this client owns: background jobs, other clients' runs, replay.
 *
 * @example
 * ```ts
 * const sh = await sb.shell({ onOutput: ({ stream, data }) => console.log(stream, new TextDecoder().decode(data)) })
 * ```
 */
export interface ShellOutput {
  /** The run it belongs to (another client's), or null for output between runs. */
  runId: string | null
  /** Which stream. */
  stream: 'stdout' | 'stderr'
  /** The raw bytes. */
  data: Uint8Array
  /** Log offset of the first byte. */
  offset: number
}

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

/** Run options with the encoding resolved; callbacks get the type the encoding implies. */
interface StartOptions {
  timeoutMs?: number | undefined
  stdin?: string | Uint8Array | undefined
  signal?: AbortSignal | undefined
  binary: boolean
  onStdout?: OutputCallback | undefined
  onStderr?: OutputCallback | undefined
}

/** A run's output callback with the encoding resolved. */
type OutputCallback = (chunk: string | Uint8Array) => unknown

/** Resolves public run options; the callbacks receive bytes exactly when `binary` is set. */
function toStartOptions(options: ShellRunOptions<'binary'> | ShellRunOptions<'utf8'>): StartOptions {
  return {
    timeoutMs: options.timeoutMs,
    stdin: options.stdin,
    signal: options.signal,
    binary: options.encoding === 'binary',
    onStdout: options.onStdout as StartOptions['onStdout'],
    onStderr: options.onStderr as StartOptions['onStderr'],
  }
}

type RunState = 'waiting' | 'sent' | 'started' | 'done'

interface Run {
  id: string
  frame: string
  state: RunState
  binary: boolean
  keep: boolean
  timeoutMs: number | undefined
  stdout: OutputBuffer | null
  stderr: OutputBuffer | null
  onStdout: OutputCallback | undefined
  onStderr: OutputCallback | undefined
  /** Settles when the callbacks' pending promises have; null when none is pending. */
  chain: Promise<void> | null
  outDecoder: InstanceType<typeof TextDecoder> | null
  errDecoder: InstanceType<typeof TextDecoder> | null
  /** `performance.now()` after which the client stops waiting for the run's end; 0 before it starts. */
  deadlineAt: number
  abandoned: boolean
  resolve: (result: CommandResult<string | Uint8Array>) => void
  reject: (error: unknown) => void
}

interface Waiter {
  resolve: () => void
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
  readonly #maxOutputBytes: number
  readonly #graceMs: number
  readonly #owned: boolean
  readonly #onOutput: ((output: ShellOutput) => void) | undefined
  readonly #onClose: (() => void) | undefined
  readonly #prefix = Math.random().toString(36).slice(2, 8)
  readonly #runs = new Map<string, Run>()
  #outbox: Run[] = []
  #seq = 0
  #offset = 0
  #hasOffset = false
  #live = false
  #attached = false
  #generation = 0
  #reconciling = false
  #encoding: 'utf8' | 'base64' = 'base64'
  #closedError: ConchError | null = null
  #exitWaiters: Waiter[] = []
  #sweep: ReturnType<typeof setInterval> | undefined
  #pongWaiters = new Map<number, Waiter>()
  #attach: { resolve: () => void; reject: (err: unknown) => void } | null = null
  readonly #flow = new OutputFlow(LIMITS.clientWindowBytes, (offset) => {
    this.#conn.send(`{"type":"ack","offset":${offset}}`)
  })

  /** @internal Use `sb.shell()` or `sb.reattachShell()`. */
  constructor(init: ShellInit) {
    this.#session = init.session
    this.sessionId = init.session.id
    this.sandboxId = init.sandboxId
    this.env = init.session.env
    this.aliases = init.session.aliases
    this.#maxOutputBytes = init.maxOutputBytes
    this.#graceMs = init.policy.runDeadlineGraceMs
    this.#owned = init.owned
    this.#onOutput = init.onOutput
    this.#onClose = init.onClose
    if (init.offset !== undefined) {
      this.#offset = init.offset
      this.#hasOffset = true
    }
    const wsBase = init.baseUrl.replace(/^http/, 'ws')
    const path = `/v1/sandboxes/${encodeURIComponent(init.sandboxId)}/shell`
    this.#conn = new ShellConnection({
      WebSocket: init.WebSocket,
      protocols: [SHELL_SUBPROTOCOL, BEARER_SUBPROTOCOL_PREFIX + init.secret],
      urlFor: () => {
        const offset = this.#hasOffset ? `&offset=${this.#offset}` : ''
        return `${wsBase}${path}?sessionId=${encodeURIComponent(this.sessionId)}&encoding=base64${offset}`
      },
      policy: init.policy,
      events: {
        onFrame: (frame) => this.#onFrame(frame),
        onOutput: (frame) => this.#onData(frame.stream, frame.id, frame.data, frame.offset),
        onBadFrame: (message) =>
          this.#closeAll(
            new ConchErrorClass(
              'INVALID_FRAME',
              `shell ${this.sessionId}: the runner sent a frame this SDK cannot read (${message}); ` +
                'the runner and @conch/sdk are probably incompatible versions',
            ),
          ),
        onOpen: () => {
          this.#generation++
          this.#conn.send(CLIENT_HELLO)
        },
        onDrop: () => this.#onDrop(),
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
    const attached = new Promise<void>((resolve, reject) => {
      this.#attach = { resolve, reject }
    })
    try {
      await this.#conn.start()
    } catch (err) {
      this.#attach = null
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
    return this.#offset
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
    options: ShellRunOptions<'binary'> & { encoding: 'binary' },
  ): Promise<CommandResult<Uint8Array>>
  run(command: string, options?: ShellRunOptions<'utf8'>): Promise<CommandResult<string>>
  run(
    command: string,
    options: ShellRunOptions<'binary'> | ShellRunOptions<'utf8'> = {},
  ): Promise<CommandResult<string> | CommandResult<Uint8Array>> {
    return this.#start(command, toStartOptions(options), true).promise as Promise<
      CommandResult<string> | CommandResult<Uint8Array>
    >
  }

  /**
   * Runs a command and yields its output as it arrives, then one `exit` event. Breaking out of
   * the loop interrupts the command.
   *
   * @example
   * ```ts
   * for await (const ev of sh.stream('npm install')) {
   *   if (ev.type === 'exit') console.log('exit', ev.code)
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
    const queue = new AsyncQueue<ShellEvent<string | Uint8Array>>()
    let finished = false
    const { id, promise } = this.#start(
      command,
      {
        ...options,
        binary: options.encoding === 'binary',
        onStdout: (data) => new Promise<void>((taken) => queue.push({ type: 'stdout', data }, taken)),
        onStderr: (data) => new Promise<void>((taken) => queue.push({ type: 'stderr', data }, taken)),
      },
      false,
    )
    promise.then(
      (r) => {
        finished = true
        queue.push({
          type: 'exit',
          code: r.exitCode,
          timedOut: r.timedOut,
          oomKilled: r.oomKilled,
          durationMs: r.durationMs,
        })
        queue.end()
      },
      (err: unknown) => {
        finished = true
        queue.fail(err)
      },
    )
    const iterator: AsyncIterableIterator<ShellEvent<string | Uint8Array>> = {
      next: () => queue.next(),
      return: async () => {
        queue.end()
        queue.drain()
        if (!finished) {
          this.#conn.send(JSON.stringify({ type: 'shell_interrupt', id }))
          await promise.catch(() => {})
        }
        return { value: undefined, done: true }
      },
      [Symbol.asyncIterator]: () => iterator,
    }
    return iterator
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
    const id = `${this.#prefix}.${++this.#seq}`
    if (this.#closedError) return { id, promise: Promise.reject(this.#closedError) }
    const signal = options.signal
    if (signal?.aborted) return { id, promise: Promise.reject(signal.reason) }
    // The id is [a-z0-9.] only, so the common frame is built without an intermediate object.
    const frame =
      options.stdin === undefined && options.timeoutMs === undefined
        ? `{"type":"shell_run","id":"${id}","command":${JSON.stringify(command)}}`
        : JSON.stringify({
            type: 'shell_run',
            id,
            command,
            timeoutMs: options.timeoutMs,
            ...stdinFields(options.stdin, encodeBase64),
          })
    let run!: Run
    const promise = new Promise<CommandResult<string | Uint8Array>>((resolve, reject) => {
      run = {
        id,
        frame,
        state: 'waiting',
        binary: options.binary,
        keep,
        timeoutMs: options.timeoutMs,
        stdout: null,
        stderr: null,
        onStdout: options.onStdout,
        onStderr: options.onStderr,
        chain: null,
        outDecoder: null,
        errDecoder: null,
        deadlineAt: 0,
        abandoned: false,
        resolve,
        reject,
      }
    })
    if (signal) {
      const onAbort = () => {
        if (run.state === 'done') return
        if (run.state === 'waiting') this.#outbox = this.#outbox.filter((r) => r !== run)
        else this.#conn.send(JSON.stringify({ type: 'shell_interrupt', id }))
        this.#fail(run, signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      promise.then(
        () => signal.removeEventListener('abort', onAbort),
        () => signal.removeEventListener('abort', onAbort),
      )
    }
    this.#runs.set(id, run)
    if (this.#canSend() && this.#outbox.length === 0 && this.#conn.send(frame)) run.state = 'sent'
    else this.#outbox.push(run)
    return { id, promise }
  }

  #canSend(): boolean {
    return this.#live && !this.#reconciling
  }

  #flush(): void {
    while (this.#outbox.length > 0 && this.#canSend()) {
      const run = this.#outbox[0]
      if (!run) break
      if (run.state !== 'waiting') {
        this.#outbox.shift()
        continue
      }
      if (!this.#conn.send(run.frame)) break
      run.state = 'sent'
      this.#outbox.shift()
    }
  }

  #onFrame(frame: IncomingFrame): void {
    switch (frame.type) {
      case 'shell_out':
      case 'shell_err':
        this.#onData(
          frame.type === 'shell_out' ? 'stdout' : 'stderr',
          frame.id,
          this.#encoding === 'base64' ? decodeBase64(frame.data) : textEncoder.encode(frame.data),
          frame.offset,
        )
        return
      case 'shell_start': {
        this.#advance(frame.offset)
        const run = this.#runs.get(frame.id)
        if (run && (run.state === 'sent' || run.state === 'waiting')) this.#started(run)
        return
      }
      case 'shell_exit': {
        this.#advance(frame.offset)
        const run = this.#runs.get(frame.id)
        if (run && run.state !== 'done') this.#finish(run, frame)
        this.#wakeExitWaiters()
        return
      }
      case 'shell_ready': {
        this.#encoding = frame.encoding
        this.#flow.attached(frame.offset)
        if (!this.#hasOffset) {
          this.#offset = frame.offset
          this.#hasOffset = true
        } else if (frame.offset > this.#offset) {
          this.#lose(
            frame.offset,
            `the runner resumed shell ${this.sessionId} at offset ${frame.offset}, after ${this.#offset}`,
          )
        }
        const running = frame.running === null ? undefined : this.#runs.get(frame.running)
        if (running && running.state === 'sent') this.#started(running)
        return
      }
      case 'scrollback_end':
        this.#advance(frame.offset)
        this.#live = true
        if (!this.#attached) {
          this.#attached = true
          this.#attach?.resolve()
          this.#attach = null
          this.#flush()
        } else void this.#reconcile()
        return
      case 'shell_closed':
        this.#closeAll(
          new ShellClosedError(
            `shell ${this.sessionId} in sandbox ${this.sandboxId} closed (${frame.reason}); open a new shell to continue`,
            { exitCode: frame.code, signal: frame.signal },
          ),
        )
        return
      case 'error':
        this.#onError(frame)
        return
      case 'pong': {
        const t = frame.t ?? -1
        const waiter = this.#pongWaiters.get(t)
        if (waiter) {
          this.#pongWaiters.delete(t)
          waiter.resolve()
        }
        return
      }
      case 'hello':
        this.#flow.negotiated(
          frame.capabilities.includes('output_ack'),
          this.#hasOffset ? this.#offset : null,
        )
        if (frame.protocolVersion !== SDK_PROTOCOL_VERSION) {
          this.#closeAll(
            new ConchErrorClass(
              'UNSUPPORTED_PROTOCOL_VERSION',
              `the runner speaks protocol ${frame.protocolVersion} and this @conch/sdk speaks ${SDK_PROTOCOL_VERSION}; install a matching @conch/sdk`,
            ),
          )
        }
        return
      case 'ping':
        return
    }
  }

  #onData(stream: 'stdout' | 'stderr', runId: string | null, data: Uint8Array, offset: number): void {
    let bytes = data
    const end = offset + bytes.length
    if (this.#hasOffset && end <= this.#offset && bytes.length > 0) return
    if (this.#hasOffset && offset < this.#offset) bytes = bytes.subarray(this.#offset - offset)
    this.#advance(end)
    const start = end - bytes.length
    const run = runId === null ? undefined : this.#runs.get(runId)
    if (!run) {
      this.#flow.received(end)
      this.#onOutput?.({ runId, stream, data: bytes, offset: start })
      return
    }
    if (run.state === 'done' || bytes.length === 0) {
      this.#flow.received(end)
      return
    }
    if (run.state !== 'started') this.#started(run)
    if (run.keep) {
      if (stream === 'stdout') {
        run.stdout ??= new OutputBuffer(this.#maxOutputBytes)
        run.stdout.push(bytes)
      } else {
        run.stderr ??= new OutputBuffer(this.#maxOutputBytes)
        run.stderr.push(bytes)
      }
    }
    const callback = stream === 'stdout' ? run.onStdout : run.onStderr
    if (!callback) {
      this.#flow.received(end)
      return
    }
    let chunk: string | Uint8Array = bytes
    if (!run.binary) {
      let decoder: InstanceType<typeof TextDecoder>
      if (stream === 'stdout') {
        run.outDecoder ??= new TextDecoder()
        decoder = run.outDecoder
      } else {
        run.errDecoder ??= new TextDecoder()
        decoder = run.errDecoder
      }
      chunk = decoder.decode(bytes, { stream: true })
      if (chunk === '') {
        this.#flow.received(end)
        return
      }
    }
    this.#deliver(run, callback, chunk, start, end)
  }

  /**
   * Hands a chunk to a run's callback. While a promise a callback returned is pending, later
   * chunks wait behind it and stay held, so the runner stops once a window is unconsumed.
   */
  #deliver(run: Run, callback: OutputCallback, chunk: string | Uint8Array, start: number, end: number): void {
    const call = (): unknown => {
      try {
        return callback(chunk)
      } catch (err) {
        this.#fail(run, err)
        return undefined
      }
    }
    let pending: Promise<void>
    if (run.chain) {
      pending = run.chain.then(call).then(() => undefined)
    } else {
      const returned = call()
      if (!isPromiseLike(returned)) {
        this.#flow.received(end)
        return
      }
      pending = Promise.resolve(returned).then(() => undefined)
    }
    const release = this.#flow.hold(start, end)
    const chain: Promise<void> = pending.then(
      () => {
        release()
        if (run.chain === chain) run.chain = null
      },
      (err: unknown) => {
        release()
        if (run.chain === chain) run.chain = null
        this.#fail(run, err)
      },
    )
    run.chain = chain
  }

  #advance(offset: number): void {
    if (offset > this.#offset || !this.#hasOffset) {
      this.#offset = offset
      this.#hasOffset = true
    }
  }

  #started(run: Run): void {
    run.state = 'started'
    run.deadlineAt =
      performance.now() + commandDeadlineMs(run.timeoutMs, this.#session.info.commandTimeoutMs, this.#graceMs)
    // One sweep per shell instead of a timer per run keeps the hot path to a field write.
    if (this.#sweep === undefined) {
      this.#sweep = setInterval(
        () => this.#sweepDeadlines(),
        Math.min(1_000, Math.max(10, this.#graceMs / 2)),
      )
      ;(this.#sweep as { unref?: () => void }).unref?.()
    }
  }

  #sweepDeadlines(): void {
    const now = performance.now()
    for (const run of this.#runs.values()) {
      if (run.state !== 'started' || run.abandoned || now < run.deadlineAt) continue
      this.#fail(
        run,
        new DeadlineError(
          `run ${run.id} on shell ${this.sessionId} passed its timeout plus ${this.#graceMs} ms and the runner ` +
            'never reported its end; the runner may be stuck: interrupt the shell or open a new one',
        ),
      )
    }
  }

  #finish(
    run: Run,
    exit: { code: number; timedOut: boolean; oomKilled?: boolean; durationMs: number },
  ): void {
    run.state = 'done'
    this.#runs.delete(run.id)
    if (run.abandoned) return
    if (run.chain) {
      void run.chain.then(() => this.#complete(run, exit))
      return
    }
    this.#complete(run, exit)
  }

  #complete(
    run: Run,
    exit: { code: number; timedOut: boolean; oomKilled?: boolean; durationMs: number },
  ): void {
    if (run.abandoned) return
    try {
      const outTail = run.outDecoder?.decode()
      if (outTail) run.onStdout?.(outTail)
      const errTail = run.errDecoder?.decode()
      if (errTail) run.onStderr?.(errTail)
    } catch (err) {
      run.reject(err)
      return
    }
    const text = !run.binary
    const out = run.stdout?.bytes(text) ?? EMPTY
    const err = run.stderr?.bytes(text) ?? EMPTY
    run.resolve({
      stdout: text ? (out.length ? textDecoder.decode(out) : '') : out,
      stderr: text ? (err.length ? textDecoder.decode(err) : '') : err,
      exitCode: exit.code,
      timedOut: exit.timedOut,
      oomKilled: exit.oomKilled === true,
      truncated: (run.stdout?.truncated ?? false) || (run.stderr?.truncated ?? false),
      durationMs: exit.durationMs,
      stdoutBytes: run.stdout?.totalBytes ?? 0,
      stderrBytes: run.stderr?.totalBytes ?? 0,
    })
  }

  /** Rejects a run; its later frames are ignored. */
  #fail(run: Run, error: unknown): void {
    if (run.abandoned) return
    run.abandoned = true
    if (run.state === 'waiting') {
      run.state = 'done'
      this.#runs.delete(run.id)
    }
    run.reject(error)
  }

  #onError(frame: Extract<IncomingFrame, { type: 'error' }>): void {
    const error = errorFromWire(
      { code: frame.code, message: `shell ${this.sessionId}: ${frame.message}`, details: frame.details },
      {},
    )
    const run = frame.id === null ? undefined : this.#runs.get(frame.id)
    if (run) {
      this.#fail(run, error)
      if (run.state !== 'started') {
        run.state = 'done'
        this.#runs.delete(run.id)
      }
      return
    }
    switch (error.code) {
      case 'OUTPUT_LOST': {
        // On the first attach the caller asked for this offset explicitly: say that it is gone
        // instead of silently starting later. On a reconnect, the runs that lost output fail.
        if (!this.#attached) {
          this.#attach?.reject(error)
          this.#closeAll(error)
          return
        }
        const earliest = frame.details?.earliestOffset
        this.#lose(typeof earliest === 'number' ? earliest : this.#offset, error.message, error)
        return
      }
      case 'SESSION_NOT_FOUND':
      case 'SANDBOX_NOT_FOUND':
      case 'UNAUTHORIZED':
      case 'FORBIDDEN':
        this.#closeAll(error)
        return
      default:
        if (!this.#attached) this.#attach?.reject(error)
    }
  }

  /** Output up to `resumeAt` is gone: every run that may have had some fails with OutputLostError. */
  #lose(resumeAt: number, message: string, cause?: unknown): void {
    const details = { earliestOffset: resumeAt }
    if (resumeAt > this.#offset) this.#offset = resumeAt
    for (const run of this.#runs.values()) {
      if (run.state === 'started' || run.state === 'sent') {
        this.#fail(
          run,
          new OutputLostError(
            `run ${run.id} on shell ${this.sessionId} lost output while disconnected (${message}); run it again for a complete result`,
            { cause, details },
          ),
        )
        run.state = 'done'
        this.#runs.delete(run.id)
      }
    }
  }

  #onDrop(): void {
    this.#live = false
    for (const waiter of this.#pongWaiters.values()) waiter.resolve()
    this.#pongWaiters.clear()
    this.#wakeExitWaiters()
  }

  /**
   * After a reconnect: a run that was sent but never seen to start either reached the runner
   * (it is queued, running, or its frames were replayed) or was lost with the old socket. Once
   * the runner reports an idle session, and a ping round trip has flushed the frames it sent
   * before answering, a run still not started never arrived, so it is sent again in order.
   */
  async #reconcile(): Promise<void> {
    if (this.#reconciling) return
    const generation = this.#generation
    this.#reconciling = true
    try {
      while (generation === this.#generation && !this.#closedError) {
        if (![...this.#runs.values()].some((r) => r.state === 'sent' && !r.abandoned)) break
        const info = await this.#session.refresh()
        if (generation !== this.#generation) return
        if (info.running !== null || info.queued > 0) {
          await new Promise<void>((resolve) => this.#exitWaiters.push({ resolve }))
          continue
        }
        await this.#roundTrip()
        if (generation !== this.#generation) return
        for (const run of this.#runs.values()) {
          if (run.state !== 'sent') continue
          if (run.abandoned) {
            run.state = 'done'
            this.#runs.delete(run.id)
          } else if (!this.#conn.send(run.frame)) return
        }
        break
      }
    } catch (err) {
      if (generation === this.#generation) this.#closeAll(asConchError(err))
    } finally {
      this.#reconciling = false
      if (generation === this.#generation) this.#flush()
    }
  }

  #roundTrip(): Promise<void> {
    const t = Date.now() + Math.random()
    return new Promise((resolve) => {
      this.#pongWaiters.set(t, { resolve })
      if (!this.#conn.send(JSON.stringify({ type: 'ping', t }))) {
        this.#pongWaiters.delete(t)
        resolve()
      }
    })
  }

  #wakeExitWaiters(): void {
    const waiters = this.#exitWaiters
    this.#exitWaiters = []
    for (const w of waiters) w.resolve()
  }

  #closeAll(error: ConchError): void {
    if (this.#closedError) return
    this.#closedError = error
    this.#live = false
    clearInterval(this.#sweep)
    this.#conn.close()
    this.#attach?.reject(error)
    this.#attach = null
    for (const run of this.#runs.values()) this.#fail(run, error)
    this.#runs.clear()
    this.#outbox = []
    this.#onDrop()
    this.#onClose?.()
  }

  #throwIfClosed(): void {
    if (this.#closedError) throw this.#closedError
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === 'object' && value !== null && typeof (value as PromiseLike<unknown>).then === 'function'
  )
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
