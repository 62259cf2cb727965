import { connect, type Socket } from 'node:net'
import { encodeFrame, FrameDecoder } from '@conch/link'
import { AGENT_FRAME_TYPES, AgentFrame, LINK_VERSION, parseFrame } from '@conch/protocol'
import { checkLinkProof, linkNonce, linkProof } from '@conch/protocol/link-proof'

/** An agent frame plus its payload, as a test sees it. */
export type Received = AgentFrame & { payload: Uint8Array }

/** A minimal runner-side client of the agent link, for tests and the benchmark. */
export class AgentClient {
  readonly socket: Socket
  readonly frames: Received[] = []
  readonly #decoder = new FrameDecoder()
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>()
  readonly #waiters = new Set<() => void>()
  #nextId = 1
  /** Called for every non-reply frame; return false to not keep it in `frames`. */
  onFrame: (frame: Received) => boolean = () => true

  private constructor(socket: Socket) {
    this.socket = socket
    socket.on('data', (chunk) => {
      for (const r of this.#decoder.push(chunk)) {
        if (!r.ok) throw new Error(`agent sent an undecodable frame: ${r.error.message}`)
        const parsed = parseFrame(AgentFrame, r.frame.header, 'type', AGENT_FRAME_TYPES)
        if (!parsed.ok) throw new Error(`agent sent an invalid frame: ${parsed.error.message}`)
        const frame = parsed.value
        if (frame.type === 'result' || frame.type === 'fail') {
          const p = this.#pending.get(frame.id)
          this.#pending.delete(frame.id)
          if (frame.type === 'result') p?.resolve(frame.result)
          else p?.reject(Object.assign(new Error(frame.error.message), frame.error))
        } else {
          const received = { ...frame, payload: r.frame.payload }
          if (!this.onFrame(received)) continue
          this.frames.push(received)
          for (const w of this.#waiters) w()
        }
      }
    })
  }

  /** Connects and completes the link handshake with `secret` (the agent's link secret). */
  static async connect(path: string, secret: string): Promise<AgentClient> {
    const socket = connect(path)
    socket.setNoDelay?.(true)
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve)
      socket.once('error', reject)
    })
    const client = new AgentClient(socket)
    const nonce = linkNonce()
    client.send({ type: 'hello', linkVersion: LINK_VERSION, protocolVersion: 1, nonce })
    const hello = await client.waitFor((f) => f.type === 'hello')
    if (hello.type !== 'hello' || !checkLinkProof(secret, 'agent', nonce, hello.proof)) {
      socket.destroy()
      throw new Error('the agent did not prove the link secret')
    }
    client.send({ type: 'auth', proof: linkProof(secret, 'runner', hello.nonce) })
    return client
  }

  /** Sends a raw frame. */
  send(header: unknown, payload?: Uint8Array): void {
    this.socket.write(encodeFrame(header, payload))
  }

  /** Calls a method and resolves with its result (rejects with the wire error on `fail`). */
  call<T = unknown>(method: string, params: unknown): Promise<T> {
    const id = this.#nextId++
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      this.send({ type: 'call', id, method, params })
    })
  }

  /** Resolves with the first received frame (past or future) that matches. */
  waitFor(match: (f: Received) => boolean): Promise<Received> {
    const found = this.frames.find(match)
    if (found !== undefined) return Promise.resolve(found)
    return new Promise((resolve) => {
      const check = () => {
        const hit = this.frames.find(match)
        if (hit !== undefined) {
          this.#waiters.delete(check)
          resolve(hit)
        }
      }
      this.#waiters.add(check)
    })
  }

  /** Closes the connection. */
  close(): void {
    this.socket.destroy()
  }
}

/** An output frame as a test reads it: `shell_out` or `shell_err` with its payload. */
export interface OutputFrame {
  type: string
  ch?: number
  id?: string | null
  offset?: number
  payload: Buffer
}

/** The output frames of channel `ch` that `client` received so far. */
export function outputFrames(client: AgentClient, ch: number): OutputFrame[] {
  return (client.frames as unknown as OutputFrame[]).filter(
    (f) => (f.type === 'shell_out' || f.type === 'shell_err') && f.ch === ch,
  )
}
