// Keep-alive connections to one port of one sandbox, for the HTTP relay.
//
// A Node `http.Agent` whose connections are relayed sandbox TCP streams: a request reuses an
// idle connection to the same sandbox port when the sandbox server kept it alive, so it skips
// the agent's dial (one link round trip and a connect inside the sandbox). The sandbox server's
// own keep-alive timeout closes idle connections; a closed one ends its stream and leaves the
// pool. At most `maxSockets` connections per port, and `maxFreeSockets` idle ones.
import type { AgentOptions } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { Agent } from './node-http.ts'
import { SandboxTcpStream } from './sandbox-tcp-stream.ts'

/** Opens a relayed connection; rejects with the reason (PORT_NOT_LISTENING, RATE_LIMITED, …). */
export type OpenStream = () => Promise<Duplex>

/** A keep-alive pool of relayed connections to one sandbox port. */
export class SandboxPortAgent extends Agent {
  readonly #open: OpenStream

  /** A pool that opens connections with `open`. */
  constructor(open: OpenStream, options: AgentOptions = {}) {
    super({ keepAlive: true, maxSockets: 64, maxFreeSockets: 8, ...options })
    this.#open = open
  }

  /** A connection the sandbox server closed is never kept for the next request. */
  override keepSocketAlive(socket: Socket): boolean {
    if (socket instanceof SandboxTcpStream && socket.remoteEnded) return false
    return super.keepSocketAlive(socket) as unknown as boolean
  }

  /** Opens a connection asynchronously; Node's Agent waits for the callback. */
  override createConnection(
    _options: unknown,
    callback?: (error: Error | null, stream: Duplex) => void,
  ): undefined {
    this.#open().then(
      (stream) => callback?.(null, stream),
      (error: Error) => callback?.(error, undefined as unknown as Duplex),
    )
    return undefined
  }
}
