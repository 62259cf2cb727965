// One client WebSocket on a shell. The model:
//
//   client ──WS──▶ ShellConnection ──channel──▶ agent session (bash)
//
// On connect it sends `hello`, creates or finds the session, attaches an agent channel (the
// agent replays from the client's offset, then goes live), sends `shell_ready`, forwards the
// replay, `scrollback_end`, then live output. Every client gets its own channel, so several
// clients can watch one shell; their runs queue in the agent. A client that goes away only
// closes its channel: the shell and its runs go on, and any client can reattach by sessionId
// and offset. A client that lists `binary_output` in its hello gets output as binary messages
// (see the protocol's output-frame.ts) instead of JSON with encoded data. Output credit goes back to the agent only while the socket's send buffer is
// small and, for a client that acknowledges output (`output_ack` in its hello), while less than
// its window of output is unacknowledged: a slow client slows the command (and, since the agent
// pauses bash for its slowest subscriber, every client of the session), and the runner holds at
// most one agent channel window per socket.
//
// Run ids are the client's, scoped to its socket: the shell session registry gives each run an
// id on the agent link that no other run in flight in the session has, and frames carry the
// client's id back. Another socket's run whose id equals one of this client's runs in flight is
// not shown under that id. Every bad frame gets an error frame and the socket stays open; only
// a frame ws refuses (far too large, broken framing) closes it, after an error frame, with a
// typed reason. A socket opened with a sandbox token closes with UNAUTHORIZED when it expires.

import { isUtf8 } from 'node:buffer'
import type { Duplex } from 'node:stream'
import type { PayloadLease } from '@conch/link'
import {
  CAPABILITIES,
  CLIENT_FRAME_TYPES,
  ClientFrame,
  decodeOutputFrame,
  encodeOutputHeader,
  LIMITS,
  PROTOCOL_VERSION,
  parseJsonFrame,
  type ServerFrame,
  type ShellQuery,
  type ShellRun,
  type ShellStdin,
  type StreamName,
  type WireError,
} from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import type { WebSocket } from 'ws'
import { z } from 'zod'
import type { AgentLink } from './agent-link.ts'
import { OutputDecoder } from './output-decoder.ts'
import { checkCommand, clampCallTimeout, stdinToBase64 } from './run-input.ts'
import type { ChannelEvent, RunnerChannel } from './runner-channel.ts'
import type { RunnerContext } from './runner-context.ts'
import { RunnerError, toRunnerError } from './runner-error.ts'
import type { SandboxRuntime } from './sandbox-manager.ts'
import type { ShellSessionRegistry } from './shell-session-registry.ts'
import { ShellWebSocket } from './shell-web-socket.ts'

/** Send-buffer size above which the connection stops granting the agent credit. */
const HIGH_WATER_BYTES = 512 * 1024
/** A streamed run's call answers `{}` once queued; parsing only that keeps the hot path lean. */
const STREAMED_RUN = { result: z.object({}) }
/** Client frames held while the session attaches; more are refused. */
const MAX_EARLY_FRAMES = 256

/** Longest delay a timer takes (about 24.8 days); a later expiry re-arms. */
const MAX_TIMER_MS = 2_147_483_647

interface OwnRun {
  /** The id the client gave the run. */
  clientId: string
  release: () => void
  started: number
}

/** What a shell connection serves and with what. */
export interface ShellConnectionOptions {
  /** The open WebSocket. */
  ws: WebSocket
  /** The runner. */
  ctx: RunnerContext
  /** The sandbox whose shell this is. */
  sandbox: SandboxRuntime
  /** The parsed query of the upgrade request. */
  query: ShellQuery
  /** The request's logger. */
  log: FastifyBaseLogger
  /** The raw TCP socket under the WebSocket, corked to batch a tick's frames. */
  socket?: Duplex | null
  /** Socket counts and in-flight run ids shared by every shell socket of the runner. */
  sessions: ShellSessionRegistry
  /** When the sandbox token the socket opened with expires (epoch ms); null for the API key. */
  tokenExpiresAt?: number | null
}

/** Serves one shell WebSocket. Create it once the socket is open, then call `start()`. */
export class ShellConnection {
  readonly #ws: WebSocket
  readonly #ctx: RunnerContext
  readonly #sandbox: SandboxRuntime
  readonly #query: ShellQuery
  readonly #log: FastifyBaseLogger
  readonly #decoder: OutputDecoder
  readonly #sessions: ShellSessionRegistry
  readonly #tokenExpiresAt: number | null
  /** This client's runs in flight, by their id on the agent link. */
  readonly #runs = new Map<string, OwnRun>()
  /** The agent-link id of each of this client's runs in flight, by the client's id. */
  readonly #clientRuns = new Map<string, string>()
  readonly #lastRun: Record<StreamName, string | null> = { stdout: null, stderr: null }
  /** The id the client saw on the last output of each stream (for the decoder's flush). */
  readonly #lastRunShown: Record<StreamName, string | null> = { stdout: null, stderr: null }
  readonly #lastOffset: Record<StreamName, number> = { stdout: 0, stderr: 0 }
  #link: AgentLink | null = null
  #channel: RunnerChannel | null = null
  #sessionId: string | null = null
  #early: (string | null)[] | null = []
  #earlyBytes = 0
  #held = 0
  /** The client's window of unacknowledged output; 0 when it does not acknowledge. */
  #ackWindow = 0
  /** Log offset up to which the client has acknowledged output. */
  #acked = 0
  /** Log offset after the last output byte forwarded to the client. */
  #sentEnd = 0
  /** Output goes as binary frames (the client asked for `binary_output`). */
  #binary = false
  #closed = false
  #shellClosed: WireError | null = null
  #alive = true
  #heartbeat: NodeJS.Timeout | undefined
  #expiry: NodeJS.Timeout | undefined
  #releaseSocket: (() => void) | null = null
  readonly #onFlushed = (): void => this.#maybeRelease()
  readonly #socket: Duplex | null
  #corked = false
  readonly #uncork = (): void => {
    this.#corked = false
    this.#socket?.uncork()
  }

  /** Binds a connection to an open socket. */
  constructor(options: ShellConnectionOptions) {
    this.#socket = options.socket ?? null
    this.#ws = options.ws
    this.#ctx = options.ctx
    this.#sandbox = options.sandbox
    this.#query = options.query
    this.#log = options.log
    this.#sessions = options.sessions
    this.#tokenExpiresAt = options.tokenExpiresAt ?? null
    this.#decoder = new OutputDecoder(options.query.encoding ?? 'utf8')
    if (options.ws instanceof ShellWebSocket) options.ws.onBadFrame = (code) => this.#onBadFrame(code)
  }

  /** Sends hello, attaches to the session and starts serving frames. */
  async start(): Promise<void> {
    const ws = this.#ws
    this.#sandbox.attached += 1
    this.#ctx.metrics.shellSockets.inc()
    ws.on('message', (data, isBinary) => this.#onMessage(data, isBinary))
    ws.on('close', () => this.#teardown())
    ws.on('error', () => this.#teardown())
    ws.on('pong', () => {
      this.#alive = true
    })
    this.#heartbeat = setInterval(() => {
      if (!this.#alive) {
        this.#log.info({ sessionId: this.#sessionId }, 'shell client missed a heartbeat; dropping it')
        ws.terminate()
        return
      }
      this.#alive = false
      ws.ping()
    }, this.#ctx.limits.heartbeatIntervalMs)
    this.#heartbeat.unref()
    this.#armExpiry()
    this.#send({ type: 'hello', protocolVersion: PROTOCOL_VERSION, capabilities: [...CAPABILITIES] })
    try {
      await this.#attach()
    } catch (error) {
      const e = toRunnerError(error)
      if (e.code === 'INTERNAL') this.#log.error({ err: error }, 'shell attach failed')
      this.#ctx.metrics.errors.inc({ code: e.code })
      this.#send({
        type: 'error',
        id: null,
        code: e.code,
        message: e.message,
        ...(e.details ? { details: e.details } : {}),
      })
      this.#close(4000 + e.status, e.code)
      return
    }
    const early = this.#early ?? []
    this.#early = null
    for (const text of early) this.#handleText(text)
  }

  async #attach(): Promise<void> {
    const link = await this.#sandbox.link()
    this.#link = link
    const manager = this.#ctx.manager
    let sessionId = this.#query.sessionId
    if (!sessionId) sessionId = (await manager.createSession(this.#sandbox, {})).id
    if (this.#closed) return
    this.#releaseSocket = this.#sessions.openSocket(
      this.#sandbox.id,
      sessionId,
      this.#ctx.limits.maxSocketsPerSession,
    )
    const channel = link.openChannel()
    this.#channel = channel
    const attach = () =>
      link.call('session.attach', {
        sessionId: sessionId,
        ch: channel.id,
        ...(this.#query.offset === undefined ? {} : { offset: this.#query.offset }),
      })
    let info: Awaited<ReturnType<typeof attach>>
    try {
      info = await attach()
    } catch (error) {
      if (!(error instanceof RunnerError) || error.code !== 'SESSION_NOT_FOUND' || !this.#query.sessionId)
        throw error
      await manager.createSession(this.#sandbox, { id: sessionId })
      info = await attach()
    }
    if (this.#closed) return
    if (!this.#ctx.store.hasSession(this.#sandbox.id, sessionId))
      manager.noteSession(this.#sandbox, sessionId)
    this.#sessionId = sessionId
    if (info.running === null && info.queued === 0) this.#sessions.dropDetached(this.#sandbox.id, sessionId)
    else if (info.running !== null) this.#sessions.noteForeignRun(this.#sandbox.id, sessionId, info.running)
    if (info.status === 'closed' && info.closed) {
      this.#shellClosed = {
        code: 'SHELL_CLOSED',
        message: `session ${sessionId} is closed: ${info.closed.reason}`,
      }
    }
    this.#sentEnd = this.#query.offset ?? info.offset
    const restored = this.#sandbox.restoredFrom
    this.#send({
      type: 'shell_ready',
      sessionId,
      offset: this.#sentEnd,
      encoding: this.#decoder.encoding,
      running: info.running,
      ...(restored?.sessions.some((s) => s.id === sessionId)
        ? { resumed: { snapshotId: restored.snapshotId, processesRestarted: restored.processesRestarted } }
        : {}),
    })
    channel.consume((event) => this.#onChannel(event))
  }

  /**
   * Forwards the agent's channel events to the client. The link uses the WebSocket's names and
   * fields, so each event maps to the frame of the same name; what is left here is the run id
   * shown to this client, output decoding, and the runner's own bookkeeping.
   */
  #onChannel(event: ChannelEvent): void {
    switch (event.type) {
      case 'shell_out':
      case 'shell_err': {
        const { id: run, offset, payload } = event
        const stream = event.type === 'shell_out' ? 'stdout' : 'stderr'
        const n = payload.byteLength
        if (this.#lastRun[stream] !== run) {
          this.#flush(stream)
          this.#lastRun[stream] = run
          this.#lastRunShown[stream] = this.#shownId(run) ?? null
        }
        this.#lastOffset[stream] = offset + n
        if (offset + n > this.#sentEnd) this.#sentEnd = offset + n
        if (this.#binary) {
          this.#sendBinary(
            encodeOutputHeader(stream, this.#lastRunShown[stream], offset),
            payload,
            event.lease,
          )
          this.#credit(n)
          return
        }
        const data = this.#decoder.decode(stream, payload)
        event.lease?.release()
        if (data) this.#sendOutput(stream, this.#lastRunShown[stream], data, offset)
        this.#credit(n)
        return
      }
      case 'shell_start': {
        const id = this.#shownId(event.id)
        if (id) this.#send({ type: 'shell_start', id, offset: event.offset })
        return
      }
      case 'shell_exit': {
        this.#flush('stdout')
        this.#flush('stderr')
        const id = this.#shownId(event.id)
        if (id) {
          this.#send({
            type: 'shell_exit',
            id,
            code: event.code,
            timedOut: event.timedOut,
            durationMs: event.durationMs,
            offset: event.offset,
            ...(event.oomKilled === true ? { oomKilled: true } : {}),
          })
        }
        const own = this.#forgetRun(event.id)
        if (own) {
          this.#ctx.metrics.runs.inc({ via: 'shell', outcome: event.timedOut ? 'timeout' : 'exit' })
          this.#ctx.metrics.runDuration.observe({ via: 'shell' }, (performance.now() - own.started) / 1000)
        } else if (this.#sessionId) {
          this.#sessions.releaseRun(this.#sandbox.id, this.#sessionId, event.id, this)
        }
        return
      }
      case 'scrollback_end':
        this.#send({ type: 'scrollback_end', offset: event.offset })
        return
      case 'shell_closed': {
        this.#flush('stdout')
        this.#flush('stderr')
        this.#shellClosed = {
          code: 'SHELL_CLOSED',
          message: `session ${this.#sessionId} is closed: ${event.reason}`,
        }
        this.#send({ type: 'shell_closed', code: event.code, signal: event.signal, reason: event.reason })
        this.#releaseRuns('closed')
        if (this.#sessionId) this.#sessions.dropDetached(this.#sandbox.id, this.#sessionId)
        return
      }
      case 'data':
      case 'end':
        return
      case 'error': {
        this.#ctx.metrics.errors.inc({ code: event.error.code })
        this.#send({ type: 'error', id: null, ...event.error })
        this.#close(1011, event.error.code)
        return
      }
    }
  }

  /**
   * Sends a `shell_out`/`shell_err` frame built by hand: base64 needs no escaping, and
   * JSON.stringify would scan and copy the whole data string. Each frame carries one agent
   * chunk (at most `maxDataChunkBytes`), which keeps its string below V8's large-object size in
   * the runner and in the client, so it dies young instead of waiting for a full GC.
   */
  #sendOutput(stream: StreamName, run: string | null, data: string, offset: number): void {
    const type = stream === 'stdout' ? 'shell_out' : 'shell_err'
    const id = run === null ? 'null' : JSON.stringify(run)
    const text = this.#decoder.encoding === 'base64' ? `"${data}"` : JSON.stringify(data)
    this.#sendData(`{"type":"${type}","id":${id},"data":${text},"offset":${offset}}`)
  }

  #flush(stream: StreamName): void {
    const rest = this.#decoder.flush(stream)
    if (!rest) return
    const type = stream === 'stdout' ? 'shell_out' : 'shell_err'
    this.#send({ type, id: this.#lastRunShown[stream], data: rest, offset: this.#lastOffset[stream] })
  }

  /**
   * The id under which this client sees the run `run` of the agent link: its own id for its
   * own runs, the link id for other clients' runs, and null for output of another client's run
   * whose id this client is using for a run in flight (its start and exit are not shown).
   */
  #shownId(run: string | null): string | null {
    if (run === null) return null
    const own = this.#runs.get(run)
    if (own) return own.clientId
    return this.#clientRuns.has(run) ? null : run
  }

  /** Ends this client's run `runId` (link id): frees its queue slot and its id; undefined if not its own. */
  #forgetRun(runId: string): OwnRun | undefined {
    const own = this.#runs.get(runId)
    if (!own) return undefined
    this.#runs.delete(runId)
    this.#clientRuns.delete(own.clientId)
    own.release()
    if (this.#sessionId) this.#sessions.releaseRun(this.#sandbox.id, this.#sessionId, runId, this)
    return own
  }

  /**
   * Grants credit now while the socket drains and the client has room in its window;
   * otherwise holds it until a send completes or an ack arrives.
   */
  #credit(n: number): void {
    if (this.#held === 0 && this.#canGrant()) {
      this.#channel?.release(n)
      return
    }
    this.#held += n
  }

  #canGrant(): boolean {
    if (this.#ws.bufferedAmount >= HIGH_WATER_BYTES) return false
    return this.#ackWindow === 0 || this.#sentEnd - this.#acked < this.#ackWindow
  }

  #maybeRelease(): void {
    if (this.#held > 0 && this.#canGrant()) {
      const n = this.#held
      this.#held = 0
      this.#channel?.release(n)
      this.#channel?.flushCredit()
    }
  }

  #onMessage(data: unknown, isBinary: boolean): void {
    this.#alive = true
    // The server skips ws's UTF-8 check (which closes the socket) so that a bad text frame
    // gets an error frame like any other bad frame.
    const bytes = Array.isArray(data)
      ? Buffer.concat(data as Buffer[])
      : data instanceof ArrayBuffer
        ? Buffer.from(data)
        : Buffer.isBuffer(data)
          ? data
          : Buffer.from(String(data), 'utf8')
    if (isBinary) {
      this.#onBinary(bytes)
      return
    }
    if (!isUtf8(bytes)) {
      this.#sendError(
        null,
        'INVALID_FRAME',
        'the text frame is not valid UTF-8; send JSON encoded as UTF-8 (binary stdin goes base64 with stdinEncoding)',
      )
      return
    }
    const text = bytes.toString('utf8')
    if (this.#early) {
      if (
        this.#early.length >= MAX_EARLY_FRAMES ||
        this.#earlyBytes + text.length > this.#ctx.limits.maxClientFrameBytes
      ) {
        this.#sendError(null, 'RATE_LIMITED', 'too many frames before shell_ready; wait for it')
        return
      }
      this.#earlyBytes += text.length
      this.#early.push(text)
      return
    }
    this.#handleText(text)
  }

  /** A client sends no binary frames: each gets the error its header earns, and the socket stays open. */
  #onBinary(bytes: Buffer): void {
    const limit = this.#ctx.limits.maxClientFrameBytes
    if (bytes.byteLength > limit) {
      this.#sendError(null, 'FRAME_TOO_LARGE', `frame exceeds the ${limit}-byte limit`, { limit })
      return
    }
    const read = decodeOutputFrame(bytes)
    if (!read.ok) {
      this.#sendError(null, read.code, read.message)
      return
    }
    this.#sendError(
      null,
      'INVALID_FRAME',
      'binary output frames go from the runner to the client only; send JSON text frames',
    )
  }

  #handleText(text: string | null): void {
    if (text === null || this.#closed) return
    const parsed = parseJsonFrame(
      ClientFrame,
      text,
      'type',
      CLIENT_FRAME_TYPES,
      this.#ctx.limits.maxClientFrameBytes,
    )
    if (!parsed.ok) {
      this.#sendError(null, parsed.error.code, parsed.error.message)
      return
    }
    const frame = parsed.value
    switch (frame.type) {
      case 'shell_run':
        this.#run(frame)
        return
      case 'shell_stdin':
        this.#stdin(frame)
        return
      case 'shell_interrupt': {
        const run = frame.id === undefined ? undefined : (this.#clientRuns.get(frame.id) ?? frame.id)
        this.#link
          ?.call('session.interrupt', { sessionId: this.#sessionId!, ...(run ? { id: run } : {}) })
          .catch((error) => this.#sendFailure(frame.id ?? null, error))
        return
      }
      case 'ping':
        this.#send(frame.t === undefined ? { type: 'pong' } : { type: 'pong', t: frame.t })
        return
      case 'pong':
        return
      case 'ack':
        // The latest ack counts, even a lower one: a reconnecting client states what it still holds.
        if (this.#ackWindow === 0) return
        this.#acked = Math.min(frame.offset, this.#sentEnd)
        this.#maybeRelease()
        return
      case 'hello':
        if (frame.capabilities?.includes('output_ack') && this.#ackWindow === 0) {
          this.#ackWindow = frame.windowBytes ?? LIMITS.clientWindowBytes
          this.#acked = this.#sentEnd
        }
        if (frame.capabilities?.includes('binary_output') && !this.#binary) {
          this.#flush('stdout')
          this.#flush('stderr')
          this.#binary = true
        }
        if (frame.protocolVersion > PROTOCOL_VERSION) {
          this.#sendError(
            null,
            'UNSUPPORTED_PROTOCOL_VERSION',
            `this runner speaks protocol ${PROTOCOL_VERSION}; the client asked for ${frame.protocolVersion}`,
          )
        }
        return
    }
  }

  #run(frame: ShellRun): void {
    if (this.#shellClosed) {
      this.#sendError(frame.id, this.#shellClosed.code, this.#shellClosed.message)
      return
    }
    if (this.#clientRuns.has(frame.id)) {
      this.#sendError(
        frame.id,
        'BAD_REQUEST',
        `run id ${frame.id} is already in flight on this connection; use a new id for each run`,
      )
      return
    }
    let stdin: string | undefined
    let release: () => void
    try {
      checkCommand(frame.command, this.#ctx.limits)
      stdin = stdinToBase64(frame.stdin, frame.stdinEncoding)
      if (frame.stdinPipe === true && stdin !== undefined) {
        throw new RunnerError('BAD_REQUEST', 'give stdin data or stdinPipe, not both')
      }
      release = this.#sandbox.acquireRun(this.#ctx.limits.maxQueuedRunsPerSandbox)
    } catch (error) {
      this.#sendFailure(frame.id, error)
      return
    }
    const sessionId = this.#sessionId!
    const runId = this.#sessions.claimRun(this.#sandbox.id, sessionId, frame.id, this)
    this.#runs.set(runId, { clientId: frame.id, release, started: performance.now() })
    this.#clientRuns.set(frame.id, runId)
    this.#link!.call(
      'session.run',
      {
        sessionId: sessionId,
        id: runId,
        command: frame.command,
        timeoutMs: clampCallTimeout(frame.timeoutMs, this.#ctx.limits),
        stdin,
        ...(frame.stdinPipe === true ? { stdinPipe: true } : {}),
        buffer: false,
      },
      STREAMED_RUN,
    ).catch((error) => {
      this.#forgetRun(runId)
      this.#sendFailure(frame.id, error)
    })
  }

  /** Forwards input for one of this client's runs to its stdin pipe. */
  #stdin(frame: ShellStdin): void {
    const run = this.#clientRuns.get(frame.id)
    if (run === undefined) {
      this.#sendError(frame.id, 'BAD_REQUEST', `run id ${frame.id} is not in flight on this connection`)
      return
    }
    let data: string | undefined
    try {
      data = stdinToBase64(frame.data, frame.encoding)
    } catch (error) {
      this.#sendFailure(frame.id, error)
      return
    }
    this.#link
      ?.call('session.stdin', {
        sessionId: this.#sessionId!,
        id: run,
        ...(data === undefined ? {} : { data }),
        ...(frame.end === true ? { end: true } : {}),
      })
      .catch((error) => this.#sendFailure(frame.id, error))
  }

  #sendFailure(id: string | null, error: unknown): void {
    const e = toRunnerError(error)
    if (e.code === 'INTERNAL') this.#log.error({ err: error }, 'shell request failed')
    this.#sendError(id, e.code, e.message, e.details)
  }

  #sendError(
    id: string | null,
    code: WireError['code'],
    message: string,
    details?: Record<string, unknown>,
  ): void {
    this.#ctx.metrics.errors.inc({ code })
    this.#send({ type: 'error', id, code, message, ...(details ? { details } : {}) })
  }

  #send(frame: ServerFrame): void {
    this.#sendData(JSON.stringify(frame))
  }

  /** Sends a text frame (a string) or a binary one (a Buffer). */
  #sendData(data: string | Buffer): void {
    if (this.#closed || this.#ws.readyState !== 1) return
    // Frames produced in one tick (shell_start + output + shell_exit of a short run) leave in
    // one write.
    this.#cork()
    if (this.#held > 0) this.#ws.send(data, this.#onFlushed)
    else this.#ws.send(data)
  }

  /**
   * Sends a binary output message without copying the payload (a view into the agent link's
   * read). With a lease, the header goes into the link frame's own bytes just before the
   * payload and the message is one WebSocket frame; otherwise it goes as two fragments, header
   * then payload, back to back in one corked write (no other message can fall between them).
   * The lease is released once the write holding the payload is done (the kernel has the
   * bytes, or the socket failed), so the link may read into that memory again.
   */
  #sendBinary(header: Uint8Array, payload: Uint8Array, lease: PayloadLease | undefined): void {
    if (this.#closed || this.#ws.readyState !== 1) {
      lease?.release()
      return
    }
    this.#cork()
    if (lease === undefined) {
      this.#ws.send(header, { binary: true, fin: false })
      if (this.#held > 0) this.#ws.send(payload, { binary: true, fin: true }, this.#onFlushed)
      else this.#ws.send(payload, { binary: true, fin: true })
      return
    }
    const flushed =
      this.#held > 0
        ? () => {
            lease.release()
            this.#maybeRelease()
          }
        : lease.release
    const message = lease.prepend(header)
    if (message !== null) {
      this.#ws.send(message, { binary: true }, flushed)
      return
    }
    this.#ws.send(header, { binary: true, fin: false })
    this.#ws.send(payload, { binary: true, fin: true }, flushed)
  }

  /** Frames produced in one tick leave in one write: corks the socket until the next tick. */
  #cork(): void {
    if (this.#socket && !this.#corked) {
      this.#corked = true
      this.#socket.cork()
      process.nextTick(this.#uncork)
    }
  }

  #close(code: number, reason: string): void {
    if (this.#ws.readyState === 1) this.#ws.close(code, reason)
    this.#teardown()
  }

  #releaseRuns(outcome: string): void {
    for (const runId of [...this.#runs.keys()]) {
      this.#forgetRun(runId)
      this.#ctx.metrics.runs.inc({ via: 'shell', outcome })
    }
  }

  /** Closes the socket with UNAUTHORIZED when the token it was opened with expires. */
  #armExpiry(): void {
    const expiresAt = this.#tokenExpiresAt
    if (expiresAt === null || this.#closed) return
    const left = expiresAt - this.#ctx.now()
    if (left > 0) {
      this.#expiry = setTimeout(() => this.#armExpiry(), Math.min(left, MAX_TIMER_MS))
      this.#expiry.unref()
      return
    }
    this.#sendError(
      null,
      'UNAUTHORIZED',
      `the sandbox token this socket was opened with expired at ${new Date(expiresAt).toISOString()}`,
      { expiredAt: expiresAt },
    )
    this.#close(4000 + 401, 'UNAUTHORIZED')
  }

  /** Answers a frame ws refused before closing: an error frame now, a typed close reason. */
  #onBadFrame(closeCode: number): string {
    const limit = this.#ctx.limits.maxClientFrameBytes
    if (closeCode === 1009) {
      this.#sendError(null, 'FRAME_TOO_LARGE', `a frame far over the ${limit}-byte limit closes the socket`, {
        limit,
      })
      return 'FRAME_TOO_LARGE'
    }
    this.#sendError(
      null,
      'INVALID_FRAME',
      `the client broke WebSocket framing (close code ${closeCode}), so the socket closes; reconnect with a conforming client`,
    )
    return 'INVALID_FRAME'
  }

  #teardown(): void {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#heartbeat)
    clearTimeout(this.#expiry)
    this.#channel?.close()
    // The runs go on in the agent: their ids stay claimed, now for no socket.
    if (this.#sessionId) this.#sessions.detach(this.#sandbox.id, this.#sessionId, this)
    for (const own of this.#runs.values()) {
      own.release()
      this.#ctx.metrics.runs.inc({ via: 'shell', outcome: 'detached' })
    }
    this.#runs.clear()
    this.#clientRuns.clear()
    this.#releaseSocket?.()
    this.#sandbox.attached -= 1
    this.#sandbox.lastActivity = this.#ctx.now()
    this.#ctx.metrics.shellSockets.dec()
  }
}
