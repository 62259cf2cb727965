// One client WebSocket attached to one terminal.
//
// Model: on connect the runner opens a channel to the agent and attaches it to the terminal
// from the client's offset (default: the scrollback's start). The agent's output arrives as
// data events and leaves as binary messages (`u32 offsetHigh · u32 offsetLow · bytes`); the
// runner grants the agent credit for a chunk only once ws has handed it to the kernel, so a
// slow client holds at most the channel window in the runner and slows the program, never
// grows memory. Binary messages from the client are input, forwarded as channel data under
// the credit the agent returns as the pty takes them (`inputWindow`, from agents that do): once
// `INPUT_HELD_BYTES` wait in the runner, it stops reading the client's socket, so input a program
// is not reading waits in the client, in order, and no memory on the way grows; text
// messages are JSON control frames (resize, signal, ping). A bad frame gets an `error` frame
// and the socket stays open. The socket closing detaches the channel and never ends the
// terminal; the terminal's program ending sends `terminal_exit` and closes the socket (1000).
// A socket opened with a sandbox token closes with 4401 when the token expires.
import {
  encodeTerminalOutputHeader,
  LIMITS,
  TerminalClientFrame,
  type TerminalInfo,
  type TerminalQuery,
} from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import type { WebSocket } from 'ws'
import type { z } from 'zod'
import type { AgentLink } from './agent-link.ts'
import type { ChannelEvent, RunnerChannel } from './runner-channel.ts'
import type { RunnerContext } from './runner-context.ts'
import { toRunnerError } from './runner-error.ts'
import type { SandboxRuntime } from './sandbox-manager.ts'

/** Longest a timer may be set for (Node's limit, about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647

/** Input the runner holds for the agent before it stops reading the client's socket. */
const INPUT_HELD_BYTES = LIMITS.channelWindowBytes

/** What a terminal socket is made of. */
export interface TerminalSocketOptions {
  /** The client's socket. */
  ws: WebSocket
  /** The runner. */
  ctx: RunnerContext
  /** The sandbox. */
  sandbox: SandboxRuntime
  /** The terminal. */
  terminalId: string
  /** The parsed query. */
  query: z.infer<typeof TerminalQuery>
  /** Request logger. */
  log: FastifyBaseLogger
  /** When the token the socket was opened with expires; null for the API key. */
  tokenExpiresAt: number | null
}

/** A client attached to a terminal. */
export class TerminalSocket {
  readonly #o: TerminalSocketOptions
  #link: AgentLink | null = null
  #channel: RunnerChannel | null = null
  #closed = false
  #expiry: NodeJS.Timeout | undefined
  #release: () => void = () => {}
  /** Input waiting for the link, in order. */
  #input: Promise<void> = Promise.resolve()
  /** Bytes of input in `#input` not yet sent. */
  #inputHeld = 0
  /** Pings the client while its socket is paused (see `#holdInput`). */
  #pausedPing: NodeJS.Timeout | undefined

  /** A socket not yet attached; call `start`. */
  constructor(options: TerminalSocketOptions) {
    this.#o = options
  }

  /** Attaches to the terminal; errors become an error frame and a typed close. */
  async start(): Promise<void> {
    const { ws } = this.#o
    // An attached terminal keeps its sandbox awake (sandbox-lifetimes.ts).
    this.#release = this.#o.sandbox.hold()
    ws.on('close', () => this.#cleanup())
    ws.on('error', () => this.#cleanup())
    ws.on('message', (data, isBinary) => this.#onMessage(toBytes(data), isBinary))
    this.#armExpiry()
    try {
      const link = await this.#o.sandbox.link()
      if (this.#closed) return
      this.#link = link
      const channel = link.openChannel()
      this.#channel = channel
      const { inputWindow, ...info } = await link.call('terminal.attach', {
        terminal: this.#o.terminalId,
        ch: channel.id,
        ...(this.#o.query.offset === undefined ? {} : { offset: this.#o.query.offset }),
      })
      if (this.#closed) {
        channel.close()
        return
      }
      if (inputWindow !== undefined) channel.limitSends(inputWindow)
      this.#sendJson({
        type: 'terminal_ready',
        terminal: info,
        offset: this.#o.query.offset ?? info.startOffset,
      })
      channel.consume((event) => this.#onChannel(event))
    } catch (error) {
      this.#fail(error)
    }
  }

  #onChannel(event: ChannelEvent): void {
    const { ws } = this.#o
    switch (event.type) {
      case 'data': {
        const bytes = event.payload.byteLength
        const { lease } = event
        const sent = (err?: Error | null): void => {
          // The write is done (or failed): nothing reads the payload any more.
          lease?.release()
          if (!err) this.#channel?.release(bytes)
        }
        // The payload (a view into the link's read) is never copied: with a lease the offset
        // header goes into the link frame's own bytes before it and the message is one frame;
        // otherwise it goes as two fragments, header then payload, back to back.
        const header = encodeTerminalOutputHeader(event.offset)
        const message = lease?.prepend(header) ?? null
        if (message !== null) {
          ws.send(message, { binary: true }, sent)
          return
        }
        ws.send(header, { binary: true, fin: false })
        ws.send(event.payload, { binary: true, fin: true }, sent)
        return
      }
      case 'scrollback_end':
        this.#sendJson({ type: 'replay_end', offset: event.offset })
        this.#channel?.flushCredit()
        return
      case 'end': {
        const code = event.exitCode
        const exit = (info: TerminalInfo | null) => {
          this.#sendJson({
            type: 'terminal_exit',
            code: info?.exitCode ?? code,
            signal: info?.signal ?? null,
            ...(info ? { offset: info.endOffset } : {}),
          })
          this.#close(1000, 'terminal exited')
        }
        const link = this.#link
        if (!link) {
          exit(null)
          return
        }
        link.call('terminal.get', { terminal: this.#o.terminalId }).then(exit, () => exit(null))
        return
      }
      case 'error':
        this.#sendError(event.error.code, event.error.message, event.error.details)
        this.#close(1011, event.error.code)
        return
      case 'shell_out':
      case 'shell_err':
      case 'shell_start':
      case 'shell_exit':
      case 'shell_closed':
        return
    }
  }

  #onMessage(bytes: Uint8Array, isBinary: boolean): void {
    if (this.#closed) return
    if (isBinary) {
      const max = LIMITS.maxTerminalInputBytes
      if (bytes.byteLength > max) {
        this.#sendError(
          'FRAME_TOO_LARGE',
          `an input message of ${bytes.byteLength} bytes is over the ${max}-byte limit; send input in smaller pieces`,
          { limit: max },
        )
        return
      }
      const channel = this.#channel
      if (!channel || channel.done) {
        this.#sendError(
          'BAD_REQUEST',
          'the terminal is not attached yet (wait for terminal_ready) or has ended',
        )
        return
      }
      const copy = Uint8Array.from(bytes)
      this.#holdInput(copy.byteLength)
      this.#input = this.#input
        .then(async () => {
          await channel.write({ type: 'data' }, copy)
        })
        .catch(() => {})
        .finally(() => this.#holdInput(-copy.byteLength))
      return
    }
    let json: unknown
    try {
      json = JSON.parse(Buffer.from(bytes).toString('utf8'))
    } catch {
      this.#sendError('INVALID_FRAME', 'a text message must be one JSON control frame (resize, signal, ping)')
      return
    }
    const parsed = TerminalClientFrame.safeParse(json)
    if (!parsed.success) {
      const fields = parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.') || 'frame'}: ${i.message}`)
        .join('; ')
      this.#sendError('INVALID_FRAME', `invalid terminal frame: ${fields}`)
      return
    }
    const frame = parsed.data
    if (frame.type === 'ping') {
      this.#sendJson({ type: 'pong' })
      return
    }
    const link = this.#link
    if (!link) {
      this.#sendError('BAD_REQUEST', 'the terminal is not attached yet; wait for terminal_ready')
      return
    }
    const terminal = this.#o.terminalId
    const call =
      frame.type === 'resize'
        ? link.call('terminal.resize', { terminal, cols: frame.cols, rows: frame.rows })
        : link.call('terminal.signal', { terminal, signal: frame.signal })
    call.catch((error: unknown) => {
      const e = toRunnerError(error)
      this.#sendError(e.code, e.message, e.details)
    })
  }

  /**
   * Counts input held for the link; pauses the client's socket past `INPUT_HELD_BYTES`. A paused
   * socket reads nothing, not even the client's close, so while paused the runner pings the
   * client each heartbeat interval: a write to a client that went away fails, and the socket
   * closes instead of holding its sandbox awake until the program reads.
   */
  #holdInput(bytes: number): void {
    const { ws } = this.#o
    this.#inputHeld += bytes
    if (this.#inputHeld > INPUT_HELD_BYTES) {
      if (ws.isPaused || this.#closed) return
      ws.pause()
      this.#pausedPing = setInterval(() => {
        if (ws.readyState === 1) ws.ping()
      }, this.#o.ctx.limits.heartbeatIntervalMs)
      this.#pausedPing.unref()
    } else if (ws.isPaused) {
      ws.resume()
      clearInterval(this.#pausedPing)
    }
  }

  #fail(error: unknown): void {
    const e = toRunnerError(error)
    if (e.code === 'INTERNAL') this.#o.log.error({ err: error }, 'terminal attach failed')
    this.#sendError(e.code, e.message, e.details)
    this.#close(4000 + e.status, e.code)
  }

  #armExpiry(): void {
    const expiresAt = this.#o.tokenExpiresAt
    if (expiresAt === null || this.#closed) return
    const left = expiresAt - this.#o.ctx.now()
    if (left > 0) {
      this.#expiry = setTimeout(() => this.#armExpiry(), Math.min(left, MAX_TIMER_MS))
      this.#expiry.unref()
      return
    }
    this.#sendError(
      'UNAUTHORIZED',
      `the sandbox token this socket was opened with expired at ${new Date(expiresAt).toISOString()}; mint a new token and reconnect`,
    )
    this.#close(4401, 'UNAUTHORIZED')
  }

  #sendJson(frame: Record<string, unknown>): void {
    if (this.#o.ws.readyState === 1) this.#o.ws.send(JSON.stringify(frame))
  }

  #sendError(code: string, message: string, details?: Record<string, unknown>): void {
    this.#sendJson({ type: 'error', code, message, ...(details ? { details } : {}) })
  }

  #close(code: number, reason: string): void {
    if (this.#o.ws.readyState === 1) this.#o.ws.close(code, reason)
    this.#cleanup()
  }

  #cleanup(): void {
    if (this.#closed) return
    this.#closed = true
    this.#release()
    clearTimeout(this.#expiry)
    clearInterval(this.#pausedPing)
    this.#channel?.close()
  }
}

function toBytes(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data
  if (data instanceof ArrayBuffer) return new Uint8Array(data)
  if (Array.isArray(data)) return Buffer.concat(data as Buffer[])
  return new Uint8Array(0)
}
