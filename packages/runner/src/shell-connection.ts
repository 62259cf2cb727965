// One client WebSocket on a shell. The model:
//
//   client ──WS──▶ ShellConnection ──channel──▶ agent session (bash)
//
// On connect it sends `hello`, creates or finds the session, attaches an agent channel (the
// agent replays from the client's offset, then goes live), sends `shell_ready`, forwards the
// replay, `scrollback_end`, then live output. Every client gets its own channel, so several
// clients can watch one shell; their runs queue in the agent. A client that goes away only
// closes its channel: the shell and its runs go on, and any client can reattach by sessionId
// and offset. Output credit goes back to the agent only while the socket's send buffer is
// small, so a slow client slows the command and the runner's memory stays bounded.

import type { Duplex } from 'node:stream'
import {
  CAPABILITIES,
  CLIENT_FRAME_TYPES,
  ClientFrame,
  PROTOCOL_VERSION,
  parseJsonFrame,
  type ServerFrame,
  type ShellQuery,
  type ShellRun,
  type StreamName,
  type WireError,
} from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import type { WebSocket } from 'ws'
import { z } from 'zod'
import type { AgentLink, ChannelEvent, LinkChannel } from './agent-link.ts'
import { OutputDecoder } from './output-decoder.ts'
import { checkCommand, clampCallTimeout, stdinToBase64 } from './run-input.ts'
import type { RunnerContext } from './runner-context.ts'
import { RunnerError, toRunnerError } from './runner-error.ts'
import type { SandboxRuntime } from './sandbox-manager.ts'

/** Send-buffer size above which the connection stops granting the agent credit. */
const HIGH_WATER_BYTES = 512 * 1024
/** A streamed run's call answers `{}` once queued; parsing only that keeps the hot path lean. */
const STREAMED_RUN = { result: z.object({}) }
/** Client frames held while the session attaches; more are refused. */
const MAX_EARLY_FRAMES = 256

interface OwnRun {
  release: () => void
  started: number
}

/** Serves one shell WebSocket. Create it once the socket is open, then call `start()`. */
export class ShellConnection {
  readonly #ws: WebSocket
  readonly #ctx: RunnerContext
  readonly #sandbox: SandboxRuntime
  readonly #query: ShellQuery
  readonly #log: FastifyBaseLogger
  readonly #decoder: OutputDecoder
  readonly #runs = new Map<string, OwnRun>()
  readonly #lastRun: Record<StreamName, string | null> = { stdout: null, stderr: null }
  readonly #lastOffset: Record<StreamName, number> = { stdout: 0, stderr: 0 }
  #link: AgentLink | null = null
  #channel: LinkChannel | null = null
  #sessionId: string | null = null
  #early: (string | null)[] | null = []
  #earlyBytes = 0
  #held = 0
  #closed = false
  #shellClosed: WireError | null = null
  #alive = true
  #heartbeat: NodeJS.Timeout | undefined
  readonly #onFlushed = (): void => this.#maybeRelease()
  readonly #socket: Duplex | null
  #corked = false
  readonly #uncork = (): void => {
    this.#corked = false
    this.#socket?.uncork()
  }

  /** Binds a connection to an open socket. */
  constructor(
    ws: WebSocket,
    ctx: RunnerContext,
    sandbox: SandboxRuntime,
    query: ShellQuery,
    log: FastifyBaseLogger,
    socket: Duplex | null = null,
  ) {
    this.#socket = socket
    this.#ws = ws
    this.#ctx = ctx
    this.#sandbox = sandbox
    this.#query = query
    this.#log = log
    this.#decoder = new OutputDecoder(query.encoding ?? 'utf8')
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
    const channel = link.openChannel()
    this.#channel = channel
    const attach = () =>
      link.call('session.attach', {
        session: sessionId,
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
    if (info.status === 'closed' && info.closed) {
      this.#shellClosed = {
        code: 'SHELL_CLOSED',
        message: `session ${sessionId} is closed: ${info.closed.reason}`,
      }
    }
    this.#send({
      type: 'shell_ready',
      sessionId,
      offset: this.#query.offset ?? info.offset,
      encoding: this.#decoder.encoding,
      running: info.running,
    })
    channel.consume((event) => this.#onChannel(event))
  }

  #onChannel(event: ChannelEvent): void {
    switch (event.t) {
      case 'data': {
        const { stream, run, offset } = event.frame
        const n = event.payload.byteLength
        if (this.#lastRun[stream] !== run) {
          this.#flush(stream)
          this.#lastRun[stream] = run
        }
        this.#lastOffset[stream] = offset + n
        const data = this.#decoder.decode(stream, event.payload)
        if (data) this.#sendOutput(stream, run, data, offset)
        this.#credit(n)
        return
      }
      case 'run_start':
        this.#send({ type: 'shell_start', id: event.frame.run, offset: event.frame.offset })
        return
      case 'run_exit': {
        const f = event.frame
        this.#flush('stdout')
        this.#flush('stderr')
        this.#send({
          type: 'shell_exit',
          id: f.run,
          code: f.code,
          timedOut: f.timedOut,
          durationMs: f.durationMs,
          offset: f.offset,
        })
        const own = this.#runs.get(f.run)
        if (own) {
          this.#runs.delete(f.run)
          own.release()
          this.#ctx.metrics.runs.inc({ via: 'shell', outcome: f.timedOut ? 'timeout' : 'exit' })
          this.#ctx.metrics.runDuration.observe({ via: 'shell' }, (performance.now() - own.started) / 1000)
        }
        return
      }
      case 'replay_end':
        this.#send({ type: 'scrollback_end', offset: event.frame.offset })
        return
      case 'closed': {
        const f = event.frame
        this.#flush('stdout')
        this.#flush('stderr')
        this.#shellClosed = {
          code: 'SHELL_CLOSED',
          message: `session ${this.#sessionId} is closed: ${f.reason}`,
        }
        this.#send({ type: 'shell_closed', code: f.code, signal: f.signal, reason: f.reason })
        this.#releaseRuns('closed')
        return
      }
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
    this.#sendText(`{"type":"${type}","id":${id},"data":${text},"offset":${offset}}`)
  }

  #flush(stream: StreamName): void {
    const rest = this.#decoder.flush(stream)
    if (!rest) return
    const type = stream === 'stdout' ? 'shell_out' : 'shell_err'
    this.#send({ type, id: this.#lastRun[stream], data: rest, offset: this.#lastOffset[stream] })
  }

  /** Grants credit now while the socket drains; otherwise holds it until a send completes. */
  #credit(n: number): void {
    if (this.#held === 0 && this.#ws.bufferedAmount < HIGH_WATER_BYTES) {
      this.#channel?.release(n)
      return
    }
    this.#held += n
  }

  #maybeRelease(): void {
    if (this.#held > 0 && this.#ws.bufferedAmount < HIGH_WATER_BYTES) {
      const n = this.#held
      this.#held = 0
      this.#channel?.release(n)
      this.#channel?.flushCredit()
    }
  }

  #onMessage(data: unknown, isBinary: boolean): void {
    this.#alive = true
    if (isBinary) {
      this.#sendError(null, 'INVALID_FRAME', 'binary messages are not frames; send JSON text frames')
      return
    }
    const text = Array.isArray(data) ? Buffer.concat(data).toString('utf8') : String(data)
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
      case 'shell_interrupt':
        this.#link
          ?.call('session.interrupt', { session: this.#sessionId!, ...(frame.id ? { run: frame.id } : {}) })
          .catch((error) => this.#sendFailure(frame.id ?? null, error))
        return
      case 'ping':
        this.#send(frame.t === undefined ? { type: 'pong' } : { type: 'pong', t: frame.t })
        return
      case 'pong':
        return
      case 'hello':
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
    if (this.#runs.has(frame.id)) {
      this.#sendError(frame.id, 'BAD_REQUEST', `run id ${frame.id} is already in flight on this connection`)
      return
    }
    let stdin: string | undefined
    let release: () => void
    try {
      checkCommand(frame.command, this.#ctx.limits)
      stdin = stdinToBase64(frame.stdin, frame.stdinEncoding)
      release = this.#sandbox.acquireRun(this.#ctx.limits.maxQueuedRunsPerSandbox)
    } catch (error) {
      this.#sendFailure(frame.id, error)
      return
    }
    this.#runs.set(frame.id, { release, started: performance.now() })
    this.#link!.call(
      'session.run',
      {
        session: this.#sessionId!,
        run: frame.id,
        command: frame.command,
        timeoutMs: clampCallTimeout(frame.timeoutMs, this.#ctx.limits),
        stdin,
        buffer: false,
      },
      STREAMED_RUN,
    ).catch((error) => {
      const own = this.#runs.get(frame.id)
      if (own) {
        this.#runs.delete(frame.id)
        own.release()
      }
      this.#sendFailure(frame.id, error)
    })
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
    this.#sendText(JSON.stringify(frame))
  }

  #sendText(text: string): void {
    if (this.#closed || this.#ws.readyState !== 1) return
    // Frames produced in one tick (shell_start + output + shell_exit of a short run) leave in
    // one write: cork the socket and uncork on the next tick.
    if (this.#socket && !this.#corked) {
      this.#corked = true
      this.#socket.cork()
      process.nextTick(this.#uncork)
    }
    if (this.#held > 0) this.#ws.send(text, this.#onFlushed)
    else this.#ws.send(text)
  }

  #close(code: number, reason: string): void {
    if (this.#ws.readyState === 1) this.#ws.close(code, reason)
    this.#teardown()
  }

  #releaseRuns(outcome: string): void {
    for (const own of this.#runs.values()) {
      own.release()
      this.#ctx.metrics.runs.inc({ via: 'shell', outcome })
    }
    this.#runs.clear()
  }

  #teardown(): void {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#heartbeat)
    this.#channel?.close()
    this.#releaseRuns('detached')
    this.#sandbox.attached -= 1
    this.#sandbox.lastActivity = this.#ctx.now()
    this.#ctx.metrics.shellSockets.dec()
  }
}
