// An agent of link 1, as an older conch started it: a real Unix-socket server whose handshake
// is the one link 1 had (frames discriminated on `t`; a frame it cannot parse before the
// handshake drops the connection; a hello is answered with link 1's hello and the proof). It
// stands in for an agent that outlived its runner across the link change. With `hello` a test
// makes it answer as some other agent would (a newer link, a forged proof).
import { createServer, type Server, type Socket } from 'node:net'
import { encodeFrame, FrameDecoder } from '@conch/link'
import { linkProof } from '@conch/protocol/link-proof'

/** Link 1's runner→agent frame names. */
const LINK_1_HOST_TYPES = new Set(['hello', 'auth', 'call', 'credit', 'close', 'data', 'end', 'ping', 'pong'])

/** Link 1's answer to a hello carrying `nonce`, proved with `secret`. */
export function link1Hello(secret: string, nonce: string): Record<string, unknown> {
  return {
    t: 'hello',
    protocolVersion: 1,
    agentVersion: '0.1.0',
    pid: process.pid,
    startedAt: 1_700_000_000_000,
    nonce: 'b'.repeat(64),
    proof: linkProof(secret, 'agent', nonce),
  }
}

/** An agent socket that speaks link 1's handshake (or the `hello` it is given). */
export class LegacyAgent {
  readonly server: Server
  /** Connections accepted so far (a runner that retries opens more). */
  connections = 0
  /** Every frame header received, in order. */
  readonly received: unknown[] = []
  /** The socket path it listens on. */
  readonly path: string
  readonly #hello: (nonce: string) => Record<string, unknown>
  readonly #sockets = new Set<Socket>()

  constructor(path: string, hello: (nonce: string) => Record<string, unknown>) {
    this.path = path
    this.#hello = hello
    this.server = createServer((socket) => this.#serve(socket))
  }

  /** Listens on `path`. */
  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.path, resolve)
    })
  }

  /** Closes every connection and the server. */
  close(): Promise<void> {
    for (const s of this.#sockets) s.destroy()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }

  #serve(socket: Socket): void {
    this.connections += 1
    this.#sockets.add(socket)
    socket.on('close', () => this.#sockets.delete(socket))
    socket.on('error', () => {})
    const decoder = new FrameDecoder()
    let answered = false
    socket.on('data', (chunk) => {
      for (const r of decoder.push(chunk)) {
        if (socket.destroyed) return
        const header = r.ok ? (r.frame.header as Record<string, unknown>) : null
        if (header) this.received.push(header)
        // Link 1 parsed on `t`: anything else before the handshake drops the connection.
        const t = header?.t
        const nonce = header?.nonce
        const valid =
          typeof t === 'string' &&
          LINK_1_HOST_TYPES.has(t) &&
          (t !== 'hello' ||
            (Number.isInteger(header?.protocolVersion) &&
              typeof nonce === 'string' &&
              /^[0-9a-f]{64}$/.test(nonce)))
        if (!valid || t !== 'hello' || answered) {
          socket.destroy()
          return
        }
        answered = true
        socket.write(encodeFrame(this.#hello(String(nonce))))
      }
    })
  }
}
