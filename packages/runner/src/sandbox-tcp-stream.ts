// A TCP connection to a port inside a sandbox, as a Node Duplex on the runner.
//
// The agent dials 127.0.0.1:<port> inside the sandbox (`tcp.connect`) and relays the socket on
// one link channel. Reading: the agent sends under the channel's credit, and this stream grants
// credit only as its reader takes bytes (`_read`), so a slow client slows the sandbox server and
// the runner holds at most one window per connection. Writing: the runner may have
// `channelWindowBytes` unacknowledged at the agent (the channel's upload window); the agent
// acknowledges with `credit` once its socket took the bytes, so a sandbox server that never
// reads stops this stream's writes after one window, and the writer (the client's request
// body) is paused in turn.
import { Duplex } from 'node:stream'
import { LIMITS } from '@conch/protocol'
import type { AgentLink } from './agent-link.ts'
import type { ChannelEvent, RunnerChannel } from './runner-channel.ts'
import { RunnerError } from './runner-error.ts'
import type { SandboxBuckets } from './sandbox-network-limits.ts'

/** How long a lingering stream waits for the sandbox side to end before it closes the channel. */
const LINGER_MS = 10_000

/** Opens a TCP connection to `port` on the sandbox's loopback; rejects with the agent's error. */
export async function openSandboxTcp(
  link: AgentLink,
  port: number,
  options: SandboxTcpStreamOptions = {},
): Promise<SandboxTcpStream> {
  const channel = tcpChannel(link)
  const stream = new SandboxTcpStream(channel, options)
  try {
    await link.call('tcp.connect', { port, ch: channel.id }, { timeoutMs: 10_000 })
  } catch (error) {
    stream.destroy()
    throw error
  }
  return stream
}

/** A channel for a relayed TCP connection: its uploads wait for the agent's acknowledgements. */
export function tcpChannel(link: AgentLink): RunnerChannel {
  return link.openChannel(LIMITS.channelWindowBytes)
}

/** How a relayed connection behaves. */
export interface SandboxTcpStreamOptions {
  /** End instead of dropping on a destroy without error (see the constructor). */
  linger?: boolean
  /** The sandbox's bandwidth buckets: bytes from the sandbox take from `out`, bytes to it from `in`. */
  buckets?: SandboxBuckets | null
}

/** The runner's end of a relayed sandbox TCP connection. */
export class SandboxTcpStream extends Duplex {
  readonly #channel: RunnerChannel
  /** Bytes received and handed to the reader but not yet granted back as credit. */
  #owed = 0
  #wantsMore = true
  #remoteEnded = false
  readonly #linger: boolean
  #lingerTimer: NodeJS.Timeout | undefined
  readonly #buckets: SandboxBuckets | null

  /**
   * Wraps `channel`, on which `tcp.connect` relays the connection. With `linger`, destroying the
   * stream without an error ends it instead of dropping it: the agent delivers every byte written
   * before (a TLS close_notify, the end of a response) and the channel closes when the sandbox side
   * ends too, or after `LINGER_MS`. The egress proxy's connections linger; a relay's do not.
   */
  constructor(channel: RunnerChannel, options: SandboxTcpStreamOptions = {}) {
    super({ allowHalfOpen: false, highWaterMark: LIMITS.channelWindowBytes / 2 })
    this.#channel = channel
    this.#linger = options.linger === true
    this.#buckets = options.buckets ?? null
    channel.consume((event) => this.#onEvent(event))
  }

  /** Whether the sandbox side has closed the connection (its channel ended). */
  get remoteEnded(): boolean {
    return this.#remoteEnded
  }

  /** The link channel the connection is relayed on. */
  get channelId(): number {
    return this.#channel.id
  }

  /** Node's http client calls these on sockets; a relayed connection has nothing to tune. */
  setNoDelay(): this {
    return this
  }
  /** See `setNoDelay`. */
  setKeepAlive(): this {
    return this
  }
  /** See `setNoDelay`; timeouts belong to the proxy, not the stream. */
  setTimeout(): this {
    return this
  }
  /** See `setNoDelay`. */
  ref(): this {
    return this
  }
  /** See `setNoDelay`. */
  unref(): this {
    return this
  }

  #onEvent(event: ChannelEvent): void {
    if (this.destroyed) {
      // A lingering stream: nobody reads any more; keep the sender unblocked until it ends.
      if (event.type === 'data') this.#channel.release(event.payload.byteLength)
      else if (event.type === 'end' || event.type === 'shell_closed' || event.type === 'error') {
        clearTimeout(this.#lingerTimer)
        this.#channel.close()
      }
      return
    }
    switch (event.type) {
      case 'data': {
        const n = event.payload.byteLength
        const more = this.push(Buffer.from(event.payload.buffer, event.payload.byteOffset, n))
        if (more) this.#grant(n, false)
        else {
          this.#owed += n
          this.#wantsMore = false
        }
        return
      }
      case 'end':
      case 'shell_closed':
        this.#remoteEnded = true
        this.push(null)
        // Nobody reads an idle pooled connection: it closes now, so the pool drops it instead
        // of sending the next request into a connection the server has closed.
        if (this.listenerCount('data') === 0 && this.readableLength === 0) this.destroy()
        return
      case 'error':
        this.destroy(RunnerError.fromWire(event.error))
        return
      default:
        return
    }
  }

  override _read(): void {
    if (this.#wantsMore) return
    this.#wantsMore = true
    const owed = this.#owed
    this.#owed = 0
    this.#grant(owed, true)
  }

  /**
   * Grants the sandbox `n` bytes more credit (batched, unless `flush`), once the bandwidth
   * bucket has them.
   */
  #grant(n: number, flush: boolean): void {
    const wait = this.#buckets?.out.take(n)
    if (!wait) {
      this.#channel.release(n)
      if (flush) this.#channel.flushCredit()
      return
    }
    void wait.then(() => {
      if (this.#channel.done) return
      this.#channel.release(n)
      this.#channel.flushCredit()
    })
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    void this.#send(chunk).then(() => callback(), callback)
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#channel.send({ type: 'end' })
    callback()
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.#linger && !error && !this.#remoteEnded && !this.#channel.done) {
      this.#channel.send({ type: 'end' })
      this.#lingerTimer = setTimeout(() => this.#channel.close(), LINGER_MS)
      this.#lingerTimer.unref()
    } else this.#channel.close()
    callback(error)
  }

  async #send(chunk: Buffer): Promise<void> {
    for (let at = 0; at < chunk.length; at += LIMITS.maxDataChunkBytes) {
      const piece = chunk.subarray(at, at + LIMITS.maxDataChunkBytes)
      const wait = this.#buckets?.in.take(piece.length)
      if (wait) await wait
      if (!(await this.#channel.write({ type: 'data' }, piece)))
        throw new RunnerError('CONNECTION_LOST', 'the sandbox connection closed')
    }
  }
}
