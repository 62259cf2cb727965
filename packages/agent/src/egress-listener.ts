// The sandbox end of its egress proxy: a listener on 127.0.0.1:<port> inside the sandbox.
//
// Programs in the sandbox reach the proxy through `HTTP_PROXY`/`HTTPS_PROXY`, which point here.
// The agent does not proxy anything itself: each accepted connection is handed to the next
// pending `egress.accept` call of the runner and relayed on that call's channel, and the runner
// applies the allowlist. Connections that arrive while no call is pending wait in a short queue
// (`MAX_QUEUED`); beyond it they are closed, so a program that opens connections in a loop
// cannot grow the agent's memory.
import { createServer, type Server, type Socket } from 'node:net'
import type { AgentChannel } from './agent-channel.ts'
import { AgentError } from './agent-error.ts'

/** Connections waiting for the runner at most. */
const MAX_QUEUED = 64

/** Accepts sandbox connections to the egress proxy and hands them to the runner's calls. */
export class EgressListener {
  #server: Server | undefined
  #port: number | null = null
  readonly #queued: Socket[] = []
  readonly #waiting: ((socket: Socket) => void)[] = []

  /** Listens on 127.0.0.1:`port`; a second call is a no-op. */
  async listen(port: number): Promise<void> {
    if (this.#server) return
    const server = createServer({ noDelay: true }, (socket) => this.#arrived(socket))
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new AgentError(
            'INTERNAL',
            `the egress proxy cannot listen on 127.0.0.1:${port} inside the sandbox (${error.code})`,
          ),
        ),
      )
      server.listen(port, '127.0.0.1', () => resolve())
    })
    this.#server = server
    this.#port = port
  }

  /** The port it listens on inside the sandbox, or null before `listen`. */
  get port(): number | null {
    return this.#port
  }

  /** The next connection, for `channel`; waits until one arrives or the channel closes. */
  next(channel: AgentChannel): Promise<Socket | null> {
    const queued = this.#queued.shift()
    if (queued) return Promise.resolve(queued)
    return new Promise((resolve) => {
      const take = (socket: Socket): void => resolve(socket)
      this.#waiting.push(take)
      channel.onClose(() => {
        const at = this.#waiting.indexOf(take)
        if (at >= 0) this.#waiting.splice(at, 1)
        resolve(null)
      })
    })
  }

  /** Stops listening and drops queued connections. */
  close(): void {
    this.#server?.close()
    for (const socket of this.#queued.splice(0)) socket.destroy()
  }

  #arrived(socket: Socket): void {
    socket.on('error', () => {})
    const waiter = this.#waiting.shift()
    if (waiter) {
      waiter(socket)
      return
    }
    if (this.#queued.length >= MAX_QUEUED) {
      socket.destroy()
      return
    }
    this.#queued.push(socket)
    socket.once('close', () => {
      const at = this.#queued.indexOf(socket)
      if (at >= 0) this.#queued.splice(at, 1)
    })
  }
}
