import { decodeOutputFrame, type OutputFrame } from '@conch/protocol'
import { ConnectionError } from './conch-error.ts'
import { DEFAULT_DEADLINE_GRACE_MS } from './run-budget.ts'
import { type IncomingFrame, readServerFrame } from './server-frame.ts'
import type { WebSocketConstructor, WebSocketLike } from './web-socket-like.ts'

// One shell's WebSocket, kept alive. The connection owns the socket's life: it opens it, answers
// and sends heartbeats, notices a silent or dropped socket, and reconnects with exponential
// backoff and jitter, asking its owner for the URL each time (so the URL carries the latest
// byte offset). It knows nothing about runs: it hands every parsed frame to `onFrame` (and
// every binary output frame to `onOutput`) and reports `onDrop` and `onGiveUp`. A protocol error in a frame is reported, never thrown.

/**
 * How a connection reconnects and checks liveness.
 *
 * @example
 * ```ts
 * const sb = await Sandbox.connect(id, { url, apiKey, connection: { heartbeatIntervalMs: 5_000, maxReconnectAttempts: 20 } })
 * ```
 */
export interface ConnectionPolicy {
  /** Interval between heartbeats; the socket counts as dead after 2.5 intervals of silence. */
  heartbeatIntervalMs: number
  /** Time a socket gets to open and finish attaching (replay included). */
  connectTimeoutMs: number
  /** Reconnect attempts after a drop before giving up. */
  maxReconnectAttempts: number
  /** Delay before the first reconnect; doubles per attempt. */
  reconnectBaseDelayMs: number
  /** Largest delay between reconnects. */
  reconnectMaxDelayMs: number
  /** Time a started run gets beyond its timeout before the client stops waiting for its end. */
  runDeadlineGraceMs: number
}

/** Defaults of `ConnectionPolicy`. */
export const DEFAULT_CONNECTION_POLICY: ConnectionPolicy = {
  heartbeatIntervalMs: 10_000,
  connectTimeoutMs: 10_000,
  maxReconnectAttempts: 8,
  reconnectBaseDelayMs: 100,
  reconnectMaxDelayMs: 5_000,
  runDeadlineGraceMs: DEFAULT_DEADLINE_GRACE_MS,
}

/** What the connection tells its owner. */
export interface ConnectionEvents {
  /** A parsed frame arrived. */
  onFrame(frame: IncomingFrame): void
  /** A binary output frame arrived. */
  onOutput(frame: OutputFrame): void
  /** A frame could not be parsed. */
  onBadFrame(message: string): void
  /** A socket opened (the first one, or a reconnect). */
  onOpen(reconnect: boolean): void
  /** The socket dropped; a reconnect is scheduled. */
  onDrop(): void
  /** The connection is gone for good. */
  onGiveUp(error: unknown): void
  /** Asked after a failed reconnect: an error here (not found, auth) stops reconnecting. */
  diagnose(): Promise<unknown>
}

interface Timer {
  unref?: () => void
}

const unref = (t: unknown): void => {
  ;(t as Timer).unref?.()
}

/** Reads one field of an event object from any WebSocket implementation. */
function field(event: unknown, name: string): unknown {
  return typeof event === 'object' && event !== null && name in event
    ? (event as Record<string, unknown>)[name]
    : undefined
}

/** A self-healing WebSocket for one shell. */
export class ShellConnection {
  readonly #ctor: WebSocketConstructor
  readonly #protocols: string[]
  readonly #urlFor: () => string
  readonly #policy: ConnectionPolicy
  readonly #events: ConnectionEvents
  #socket: WebSocketLike | null = null
  #lastHeard = 0
  #heartbeat: ReturnType<typeof setInterval> | undefined
  #reconnectTimer: ReturnType<typeof setTimeout> | undefined
  #attempt = 0
  #closed = false

  constructor(options: {
    WebSocket: WebSocketConstructor
    protocols: string[]
    urlFor: () => string
    policy: ConnectionPolicy
    events: ConnectionEvents
  }) {
    this.#ctor = options.WebSocket
    this.#protocols = options.protocols
    this.#urlFor = options.urlFor
    this.#policy = options.policy
    this.#events = options.events
  }

  /** True while a socket is open. */
  get isOpen(): boolean {
    return this.#socket?.readyState === 1
  }

  /** Opens the first socket; rejects when it does not open. */
  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#dial(false, resolve, reject)
    })
  }

  /** Sends a frame now; returns false when no socket is open (the caller keeps it). */
  send(frame: string): boolean {
    const socket = this.#socket
    if (socket?.readyState !== 1) return false
    socket.send(frame)
    return true
  }

  /** Closes for good; no reconnect follows. */
  close(): void {
    this.#closed = true
    clearInterval(this.#heartbeat)
    clearTimeout(this.#reconnectTimer)
    const socket = this.#socket
    this.#socket = null
    if (socket && socket.readyState < 2) socket.close(1000, 'client closed')
  }

  #dial(reconnect: boolean, onOpen?: () => void, onFail?: (err: unknown) => void): void {
    let socket: WebSocketLike
    try {
      socket = new this.#ctor(this.#urlFor(), this.#protocols)
    } catch (err) {
      if (onFail) onFail(err)
      else this.#retry(err)
      return
    }
    socket.binaryType = 'arraybuffer'
    this.#socket = socket
    let opened = false
    // The socket counts as connected once the attach completes (`scrollback_end`), so a runner
    // that accepts the upgrade and then says nothing is dropped and dialled again.
    const openTimer = setTimeout(() => {
      if (!opened) socket.close(4000, 'connect timeout')
      else this.#lost(socket)
    }, this.#policy.connectTimeoutMs)
    socket.addEventListener('open', () => {
      opened = true
      if (this.#closed || this.#socket !== socket) return
      this.#lastHeard = Date.now()
      this.#startHeartbeat(socket)
      this.#events.onOpen(reconnect)
      onOpen?.()
    })
    socket.addEventListener('message', (event: unknown) => {
      if (this.#socket !== socket) return
      this.#lastHeard = Date.now()
      const data: unknown =
        typeof event === 'object' && event !== null ? (event as { data?: unknown }).data : undefined
      if (typeof data !== 'string') {
        const bytes =
          data instanceof ArrayBuffer
            ? new Uint8Array(data)
            : ArrayBuffer.isView(data)
              ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
              : null
        const read = bytes === null ? null : decodeOutputFrame(bytes)
        if (read?.ok) this.#events.onOutput(read.frame)
        else this.#events.onBadFrame(read ? read.message : 'a message that is neither text nor bytes')
        return
      }
      const read = readServerFrame(data)
      if (!read.ok) {
        this.#events.onBadFrame(read.message)
        return
      }
      const frame = read.frame
      if (frame === null) return
      if (frame.type === 'ping') {
        socket.send(frame.t === undefined ? '{"type":"pong"}' : JSON.stringify({ type: 'pong', t: frame.t }))
        return
      }
      if (frame.type === 'scrollback_end') {
        clearTimeout(openTimer)
        this.#attempt = 0
      }
      this.#events.onFrame(frame)
    })
    socket.addEventListener('close', (event: unknown) => {
      clearTimeout(openTimer)
      if (this.#socket !== socket) return
      if (!opened && onFail) {
        this.#socket = null
        const code = field(event, 'code')
        const reason = field(event, 'reason')
        onFail(
          new ConnectionError(
            `the shell socket closed before it opened (close code ${String(code ?? 'none')})`,
            {
              details: {
                ...(typeof code === 'number' ? { closeCode: code } : {}),
                ...(typeof reason === 'string' ? { closeReason: reason } : {}),
              },
            },
          ),
        )
        return
      }
      this.#lost(socket)
    })
    // Errors are always followed by `close`, which does the work.
    socket.addEventListener('error', () => {})
  }

  #startHeartbeat(socket: WebSocketLike): void {
    clearInterval(this.#heartbeat)
    const interval = this.#policy.heartbeatIntervalMs
    this.#heartbeat = setInterval(() => {
      if (this.#socket !== socket) return
      if (Date.now() - this.#lastHeard > interval * 2.5) {
        this.#lost(socket)
        return
      }
      if (socket.readyState === 1) socket.send(`{"type":"ping","t":${Date.now()}}`)
    }, interval)
    unref(this.#heartbeat)
  }

  #lost(socket: WebSocketLike): void {
    if (this.#socket !== socket) return
    this.#socket = null
    clearInterval(this.#heartbeat)
    if (socket.readyState < 2) socket.close(4001, 'heartbeat lost')
    if (this.#closed) return
    this.#events.onDrop()
    this.#retry(undefined)
  }

  #retry(cause: unknown): void {
    if (this.#closed) return
    if (this.#attempt >= this.#policy.maxReconnectAttempts) {
      this.#closed = true
      this.#events.onGiveUp(
        new ConnectionError(`the shell connection dropped and ${this.#attempt} reconnect attempts failed`, {
          cause,
        }),
      )
      return
    }
    const base = Math.min(
      this.#policy.reconnectMaxDelayMs,
      this.#policy.reconnectBaseDelayMs * 2 ** this.#attempt,
    )
    const delay = base / 2 + (Math.random() * base) / 2
    this.#attempt++
    this.#reconnectTimer = setTimeout(() => {
      if (this.#closed) return
      this.#dial(true, undefined, (err) => {
        void this.#events.diagnose().then((fatal) => {
          if (fatal) {
            this.#closed = true
            this.#events.onGiveUp(fatal)
          } else this.#retry(err)
        })
      })
    }, delay)
  }
}
