// One client WebSocket on a shell. The model:
//
//   client ──WS──▶ ShellConnection ──channel──▶ agent session (bash)
//
// On connect it sends `hello`, creates or finds the session, attaches an agent channel (the
// agent replays from the client's offset, then goes live), sends `shell_ready`, forwards the
// replay, `scrollback_end`, then live output. Every client gets its own channel, so several
// clients can watch one shell; their runs queue in the agent. A client that goes away only
// closes its channel: the shell and its runs go on, and any client can reattach by sessionId
// and offset. The parts: `shell-client-message.ts` reads a message, `shell-run-requests.ts`
// makes run requests into agent calls, `shell-client-runs.ts` keeps the client's runs and their
// ids, `shell-event-forwarder.ts` maps the agent's channel events to client frames and frees
// ended runs once their exit is written, `shell-output-relay.ts` forwards output and paces the
// agent's credit by the client, `shell-start-fold.ts` puts a short run's start inside its exit,
// and `shell-frame-sender.ts` sends frames batched per tick.
//
// Every bad frame gets an error frame and the socket stays open; only a frame ws refuses (far
// too large, broken framing) closes it, after an error frame, with a typed reason. A socket
// opened with a sandbox token closes with UNAUTHORIZED when it expires.

import type { Duplex } from 'node:stream'
import { CAPABILITIES, PROTOCOL_VERSION, type ShellQuery } from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import type { WebSocket } from 'ws'
import { parseClientFrame } from './client-frame-parser.ts'
import type { RunnerChannel } from './runner-channel.ts'
import type { RunnerContext } from './runner-context.ts'
import { RunnerError, toRunnerError } from './runner-error.ts'
import type { SandboxRuntime } from './sandbox-manager.ts'
import { readClientMessage, refusedMessage } from './shell-client-message.ts'
import { ShellClientRuns } from './shell-client-runs.ts'
import { ShellEventForwarder } from './shell-event-forwarder.ts'
import { ShellFrameSender } from './shell-frame-sender.ts'
import { ShellOutputRelay } from './shell-output-relay.ts'
import { ShellRunRequests } from './shell-run-requests.ts'
import type { ShellSessionRegistry } from './shell-session-registry.ts'
import { ShellStartFold } from './shell-start-fold.ts'
import { ShellWebSocket } from './shell-web-socket.ts'

/** Client frames held while the session attaches; more are refused. */
const MAX_EARLY_FRAMES = 256

/** Longest delay a timer takes (about 24.8 days); a later expiry re-arms. */
const MAX_TIMER_MS = 2_147_483_647

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
  /** The raw socket under the WebSocket: corked to batch a tick's frames; text frames are written to it directly. */
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
  readonly #sessions: ShellSessionRegistry
  readonly #tokenExpiresAt: number | null
  readonly #sender: ShellFrameSender
  readonly #output: ShellOutputRelay
  readonly #runs: ShellClientRuns
  readonly #requests: ShellRunRequests
  readonly #starts: ShellStartFold
  readonly #events: ShellEventForwarder
  #channel: RunnerChannel | null = null
  #sessionId: string | null = null
  #early: (string | null)[] | null = []
  #earlyBytes = 0
  #closed = false
  #alive = true
  #heartbeat: NodeJS.Timeout | undefined
  #expiry: NodeJS.Timeout | undefined
  #releaseSocket: (() => void) | null = null

  /** Binds a connection to an open socket. */
  constructor(options: ShellConnectionOptions) {
    this.#ws = options.ws
    this.#ctx = options.ctx
    this.#sandbox = options.sandbox
    this.#query = options.query
    this.#log = options.log
    this.#sessions = options.sessions
    this.#tokenExpiresAt = options.tokenExpiresAt ?? null
    this.#sender = new ShellFrameSender({
      ws: options.ws,
      socket: options.socket ?? null,
      onError: (code) => this.#ctx.metrics.errors.inc({ code }),
      awaitingFlush: () => this.#output.holding,
      onFlushed: () => this.#output.maybeRelease(),
      beforeUncork: () => this.#starts.flush(),
      afterWrite: () => this.#events.afterWrite(),
    })
    this.#starts = new ShellStartFold(this.#sender)
    this.#output = new ShellOutputRelay(this.#sender, options.query.encoding ?? 'utf8')
    const sandbox = options.sandbox
    this.#runs = new ShellClientRuns(options.sessions, sandbox.id, this, () => sandbox.releaseRun())
    this.#requests = new ShellRunRequests({
      ctx: options.ctx,
      sandbox: options.sandbox,
      log: options.log,
      runs: this.#runs,
      sender: this.#sender,
    })
    this.#events = new ShellEventForwarder({
      ctx: options.ctx,
      sandboxId: sandbox.id,
      sessions: options.sessions,
      sender: this.#sender,
      output: this.#output,
      starts: this.#starts,
      runs: this.#runs,
      requests: this.#requests,
      close: (code, reason) => this.#close(code, reason),
    })
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
    this.#sender.send({ type: 'hello', protocolVersion: PROTOCOL_VERSION, capabilities: [...CAPABILITIES] })
    try {
      await this.#attach()
    } catch (error) {
      const e = toRunnerError(error)
      if (e.code === 'INTERNAL') this.#log.error({ err: error }, 'shell attach failed')
      this.#ctx.metrics.errors.inc({ code: e.code })
      this.#sender.send({
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
    this.#output.channel = channel
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
    this.#runs.sessionId = sessionId
    this.#requests.attached(link, sessionId)
    if (info.running === null && info.queued === 0) this.#sessions.dropDetached(this.#sandbox.id, sessionId)
    else if (info.running !== null) this.#sessions.noteForeignRun(this.#sandbox.id, sessionId, info.running)
    if (info.status === 'closed' && info.closed) {
      this.#requests.closed = {
        code: 'SHELL_CLOSED',
        message: `session ${sessionId} is closed: ${info.closed.reason}`,
      }
    }
    this.#output.sentEnd = this.#query.offset ?? info.offset
    const restored = this.#sandbox.restoredFrom
    this.#sender.send({
      type: 'shell_ready',
      sessionId,
      offset: this.#output.sentEnd,
      encoding: this.#output.encoding,
      running: info.running,
      ...(restored?.sessions.some((s) => s.id === sessionId)
        ? { resumed: { snapshotId: restored.snapshotId, processesRestarted: restored.processesRestarted } }
        : {}),
    })
    const events = this.#events
    channel.consume((event) => events.forward(event))
  }

  #onMessage(data: unknown, isBinary: boolean): void {
    this.#alive = true
    const message = readClientMessage(data, isBinary, this.#ctx.limits.maxClientFrameBytes)
    if (!message.ok) {
      this.#sender.sendError(null, message.code, message.message, message.details)
      return
    }
    const text = message.text
    if (this.#early) {
      if (
        this.#early.length >= MAX_EARLY_FRAMES ||
        this.#earlyBytes + text.length > this.#ctx.limits.maxClientFrameBytes
      ) {
        this.#sender.sendError(null, 'RATE_LIMITED', 'too many frames before shell_ready; wait for it')
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
    const parsed = parseClientFrame(text, this.#ctx.limits.maxClientFrameBytes)
    if (!parsed.ok) {
      this.#sender.sendError(null, parsed.error.code, parsed.error.message)
      return
    }
    const frame = parsed.value
    switch (frame.type) {
      case 'shell_run':
        this.#requests.run(frame)
        return
      case 'shell_stdin':
        this.#requests.stdin(frame)
        return
      case 'shell_interrupt':
        this.#requests.interrupt(frame)
        return
      case 'ping':
        this.#sender.send(frame.t === undefined ? { type: 'pong' } : { type: 'pong', t: frame.t })
        return
      case 'pong':
        return
      case 'ack':
        this.#output.ack(frame.offset)
        return
      case 'hello':
        if (frame.capabilities?.includes('output_ack')) this.#output.expectAcks(frame.windowBytes)
        if (frame.capabilities?.includes('binary_output')) this.#output.useBinary()
        if (frame.capabilities?.includes('start_in_exit')) this.#starts.enable()
        if (frame.protocolVersion > PROTOCOL_VERSION) {
          this.#sender.sendError(
            null,
            'UNSUPPORTED_PROTOCOL_VERSION',
            `this runner speaks protocol ${PROTOCOL_VERSION}; the client asked for ${frame.protocolVersion}`,
          )
        }
        return
    }
  }

  #close(code: number, reason: string): void {
    // The frames sent before (the error that explains the close) go before the close frame.
    this.#sender.flush()
    if (this.#ws.readyState === 1) this.#ws.close(code, reason)
    this.#teardown()
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
    this.#sender.sendError(
      null,
      'UNAUTHORIZED',
      `the sandbox token this socket was opened with expired at ${new Date(expiresAt).toISOString()}`,
      { expiredAt: expiresAt },
    )
    this.#close(4000 + 401, 'UNAUTHORIZED')
  }

  /** Answers a frame ws refused before closing: an error frame now, a typed close reason. */
  #onBadFrame(closeCode: number): string {
    const refused = refusedMessage(closeCode, this.#ctx.limits.maxClientFrameBytes)
    this.#sender.sendError(null, refused.code, refused.message, refused.details)
    this.#sender.flush()
    return refused.code
  }

  #teardown(): void {
    if (this.#closed) return
    this.#closed = true
    this.#sender.close()
    clearInterval(this.#heartbeat)
    clearTimeout(this.#expiry)
    this.#channel?.close()
    // The runs go on in the agent: their ids stay claimed, now for no socket.
    this.#runs.detach(() => this.#ctx.metrics.runs.inc({ via: 'shell', outcome: 'detached' }))
    this.#releaseSocket?.()
    this.#sandbox.attached -= 1
    this.#sandbox.lastActivity = this.#ctx.now()
    this.#ctx.metrics.shellSockets.dec()
  }
}
