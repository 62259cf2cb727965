// Admission control for the runner's TCP connections, HTTP and WebSocket alike. Three rules:
// at most `maxConnections` are open at once, at most `maxConnectionsPerClient` come from one
// remote address, and a connection that has not made an authenticated request within
// `unauthenticatedTimeoutMs` is closed. So connections that never finish a request, or never
// authenticate, cannot hold the runner's file descriptors, and one client cannot take every
// slot. A refused connection gets one 429 answer with a RATE_LIMITED body and is closed.
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import { ERROR_STATUS } from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'

/** What the guard enforces. */
export interface ConnectionGuardOptions {
  /** Open connections at once. */
  maxConnections: number
  /** Open connections from one remote address. */
  maxConnectionsPerClient: number
  /** Time a connection has to make an authenticated request. */
  unauthenticatedTimeoutMs: number
  /** Where refusals are reported (one warning per burst). */
  log: FastifyBaseLogger
}

/** Refusals within this time of a reported one are counted into the next report. */
const REPORT_INTERVAL_MS = 10_000

/** Sockets waiting to authenticate, with the call that lifts their deadline. */
const pending = new WeakMap<Socket, () => void>()

/**
 * Lifts the unauthenticated deadline of the connection `socket` (called once a request on it
 * has been authenticated). A socket the guard does not watch is left alone.
 */
export function markAuthenticated(socket: Socket | null | undefined): void {
  if (!socket) return
  const lift = pending.get(socket)
  if (lift) lift()
}

/** IPv4 clients on a dual-stack socket appear as `::ffff:a.b.c.d`; count them as `a.b.c.d`. */
function clientKey(socket: Socket): string {
  const address = socket.remoteAddress ?? 'unknown'
  return address.startsWith('::ffff:') ? address.slice(7) : address
}

function refusal(message: string): string {
  const body = JSON.stringify({ error: { code: 'RATE_LIMITED', message } })
  return [
    `HTTP/1.1 ${ERROR_STATUS.RATE_LIMITED} Too Many Requests`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    'connection: close',
    '',
    body,
  ].join('\r\n')
}

/** Watches a server's connections and enforces the caps and the authentication deadline. */
export class ConnectionGuard {
  readonly #o: ConnectionGuardOptions
  readonly #perClient = new Map<string, number>()
  #open = 0
  #refused = 0
  #reportedAt = Number.NEGATIVE_INFINITY

  /** Creates a guard; `attach` starts it on a server. */
  constructor(options: ConnectionGuardOptions) {
    this.#o = options
  }

  /** Connections open now (admitted and not yet closed). */
  get open(): number {
    return this.#open
  }

  /** Starts enforcing on `server`; runs before the HTTP parser sees the connection. */
  attach(server: Server): void {
    server.prependListener('connection', (socket: Socket) => this.#admit(socket))
  }

  #admit(socket: Socket): void {
    const key = clientKey(socket)
    const fromClient = this.#perClient.get(key) ?? 0
    if (this.#open >= this.#o.maxConnections) {
      this.#refuse(
        socket,
        `the runner has ${this.#open} open connections (the limit is ${this.#o.maxConnections}); retry later`,
      )
      return
    }
    if (fromClient >= this.#o.maxConnectionsPerClient) {
      this.#refuse(
        socket,
        `${key} has ${fromClient} open connections (the limit is ${this.#o.maxConnectionsPerClient}); reuse or close some`,
      )
      return
    }
    this.#open += 1
    this.#perClient.set(key, fromClient + 1)
    const deadline = setTimeout(() => {
      pending.delete(socket)
      socket.destroy()
    }, this.#o.unauthenticatedTimeoutMs)
    deadline.unref()
    pending.set(socket, () => {
      clearTimeout(deadline)
      pending.delete(socket)
    })
    socket.once('close', () => {
      clearTimeout(deadline)
      pending.delete(socket)
      this.#open -= 1
      const n = (this.#perClient.get(key) ?? 1) - 1
      if (n > 0) this.#perClient.set(key, n)
      else this.#perClient.delete(key)
    })
  }

  #refuse(socket: Socket, message: string): void {
    // The answer goes out in one write to the kernel, and the socket is destroyed at once, so
    // the HTTP server never reads a request from it.
    socket.on('error', () => {})
    socket.write(refusal(message))
    socket.destroy()
    this.#refused += 1
    const now = performance.now()
    if (now - this.#reportedAt >= REPORT_INTERVAL_MS) {
      this.#o.log.warn({ refused: this.#refused }, `refused connections: ${message}`)
      this.#reportedAt = now
      this.#refused = 0
    }
  }
}
