// A raw WebSocket on the shell endpoint, for the tests that need to see frames the SDK hides
// (malformed input, frames pushed to a second attached client). Frames are kept in arrival
// order; `waitFor` resolves with the first frame, seen or future, that matches.

import WebSocket from 'ws'

/** A frame as received: parsed JSON, checked only by the test that reads it. */
export type RawFrame = Record<string, unknown> & { type: string }

interface Waiter {
  match: (frame: RawFrame) => boolean
  resolve: (frame: RawFrame) => void
  reject: (error: Error) => void
  from: number
}

/** Where and how to connect. */
export interface RawShellOptions {
  url: string
  sandboxId: string
  secret: string
  sessionId?: string
  /** Replay from this log offset. */
  offset?: number
  /** Send the secret as a subprotocol (as browsers do) instead of an Authorization header. */
  viaSubprotocol?: boolean
}

/** One raw shell socket. */
export class RawShellSocket implements AsyncDisposable {
  /** Every frame received so far, in order. */
  readonly frames: RawFrame[] = []
  readonly #ws: WebSocket
  readonly #waiters = new Set<Waiter>()
  #closed: { code: number; reason: string } | null = null
  #cursor = 0

  private constructor(ws: WebSocket) {
    this.#ws = ws
    ws.on('message', (data, isBinary) => {
      const text = isBinary ? '' : data.toString()
      let frame: RawFrame
      try {
        frame = JSON.parse(text) as RawFrame
      } catch {
        frame = { type: '(unparsable)', text }
      }
      this.frames.push(frame)
      for (const waiter of this.#waiters) this.#offer(waiter)
    })
    ws.on('close', (code, reason) => {
      this.#closed = { code, reason: reason.toString() }
      for (const waiter of this.#waiters) {
        waiter.reject(new Error(`socket closed (${code} ${reason.toString()}) before the frame arrived`))
      }
      this.#waiters.clear()
    })
  }

  /** Opens the socket and waits until it is open. */
  static async connect(options: RawShellOptions): Promise<RawShellSocket> {
    const params = new URLSearchParams()
    if (options.sessionId !== undefined) params.set('sessionId', options.sessionId)
    if (options.offset !== undefined) params.set('offset', String(options.offset))
    const query = params.size > 0 ? `?${params}` : ''
    const url = `${options.url.replace(/^http/, 'ws')}/v1/sandboxes/${options.sandboxId}/shell${query}`
    const ws = options.viaSubprotocol
      ? new WebSocket(url, ['conch.v1', `bearer.${options.secret}`])
      : new WebSocket(url, ['conch.v1'], { headers: { authorization: `Bearer ${options.secret}` } })
    const socket = new RawShellSocket(ws)
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
      ws.once('unexpected-response', (_req, res) => {
        reject(new Error(`upgrade refused with HTTP ${res.statusCode}`))
      })
    })
    return socket
  }

  /** Whether the socket is still open. */
  get open(): boolean {
    return this.#closed === null && this.#ws.readyState === WebSocket.OPEN
  }

  /** Sends a text message as is. */
  send(text: string): void {
    this.#ws.send(text)
  }

  /** Sends a binary message. */
  sendBinary(data: Uint8Array): void {
    this.#ws.send(data, { binary: true })
  }

  #offer(waiter: Waiter): void {
    for (let i = waiter.from; i < this.frames.length; i++) {
      const frame = this.frames[i]!
      if (waiter.match(frame)) {
        this.#waiters.delete(waiter)
        this.#cursor = Math.max(this.#cursor, i + 1)
        waiter.resolve(frame)
        return
      }
    }
  }

  /**
   * The first frame after the last one a previous `waitFor` returned that matches. A closed
   * socket rejects; the test timeout bounds the wait.
   */
  waitFor(match: (frame: RawFrame) => boolean): Promise<RawFrame> {
    return new Promise<RawFrame>((resolve, reject) => {
      const waiter: Waiter = { match, resolve, reject, from: this.#cursor }
      this.#waiters.add(waiter)
      this.#offer(waiter)
      if (this.#waiters.has(waiter) && this.#closed) {
        this.#waiters.delete(waiter)
        reject(new Error(`socket closed (${this.#closed.code}) before the frame arrived`))
      }
    })
  }

  /** The first frame of this type after the last returned one. */
  waitForType(type: string): Promise<RawFrame> {
    return this.waitFor((frame) => frame.type === type)
  }

  /** Closes the socket and waits for the close. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#closed) return
    const closed = new Promise<void>((resolve) => this.#ws.once('close', () => resolve()))
    this.#ws.close()
    await closed
  }
}
