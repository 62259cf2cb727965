// Deadlines for slow clients, enforced per connection. Node's own header and request timeouts
// are checked by a periodic scan over the server's connections, and on Node 24 one idle
// keep-alive connection opened earlier keeps that scan from closing the slow connections opened
// after it (observed: test/attacks.test.ts), so a slow-loris client could hold the router's
// sockets for as long as it keeps one idle connection. These timers do not depend on the scan: a connection must finish its request headers within `headersTimeoutMs` of opening,
// a request must arrive whole within `requestTimeoutMs` of its headers, and after an answer the
// next request's headers must follow within the keep-alive time plus `headersTimeoutMs`. A
// connection that misses a deadline gets a 408 and is closed. Upgraded sockets are left alone.
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

/** The deadlines. */
export interface RequestDeadlines {
  /** Time from connect (or from the last answer plus the keep-alive time) to complete headers. */
  headersTimeoutMs: number
  /** Time from complete headers to a complete body. */
  requestTimeoutMs: number
  /** Time an idle keep-alive connection may wait before its next request starts. */
  keepAliveTimeoutMs: number
}

const TIMED_OUT = 'HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'

/** Enforces `deadlines` on every connection of `server`. */
export function enforceRequestDeadlines(server: Server, deadlines: RequestDeadlines): void {
  const timers = new WeakMap<Socket, NodeJS.Timeout>()
  const disarm = (socket: Socket): void => {
    clearTimeout(timers.get(socket))
    timers.delete(socket)
  }
  const arm = (socket: Socket, ms: number): void => {
    disarm(socket)
    const timer = setTimeout(() => {
      timers.delete(socket)
      if (socket.destroyed) return
      if (socket.writable) socket.end(TIMED_OUT)
      socket.destroySoon()
    }, ms)
    timer.unref()
    timers.set(socket, timer)
  }
  server.on('connection', (socket: Socket) => {
    arm(socket, deadlines.headersTimeoutMs)
    socket.once('close', () => disarm(socket))
  })
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket
    arm(socket, deadlines.requestTimeoutMs)
    req.once('end', () => disarm(socket))
    // A request without a body is complete once its headers are parsed, in the same turn.
    setImmediate(() => {
      if (req.complete) disarm(socket)
    })
    res.once('finish', () => {
      if (!socket.destroyed) arm(socket, deadlines.keepAliveTimeoutMs + deadlines.headersTimeoutMs)
    })
  })
  server.on('upgrade', (req: IncomingMessage) => disarm(req.socket))
}
