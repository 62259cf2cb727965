// Pipelined requests on one connection, relayed one at a time.
//
// Node's HTTP server emits every pipelined request of a connection as soon as it parses it and
// only queues the answers, so a client that writes a thousand requests at once would have the
// proxy open a thousand upstream connections for one connection it counted against the sandbox's
// cap. The egress proxy and the TLS terminator therefore start a request only once the one
// before it on the same connection is answered, and stop reading the connection while one
// waits, so what the client wrote beyond it stays in the kernel's buffers, not the runner's.
import type { IncomingMessage, ServerResponse } from 'node:http'

/** The last request started or queued on each connection: done once its response closes. */
const last = new WeakMap<object, Promise<void>>()

/** Runs `task` for `req` once every earlier request on its connection has been answered. */
export function inTurn(req: IncomingMessage, res: ServerResponse, task: () => void): void {
  const socket = req.socket
  const done = new Promise<void>((resolve) => res.once('close', resolve))
  const before = last.get(socket)
  last.set(socket, done)
  if (!before) {
    task()
    return
  }
  socket.pause()
  void before.then(() => {
    socket.resume()
    // A client that hung up while this request waited gets nothing.
    if (!res.destroyed) task()
  })
}
