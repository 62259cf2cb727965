// A test client for the shell WebSocket: collects every server frame and waits on them. A binary
// output frame is recorded as a `shell_out`/`shell_err` frame with `binary: true`, its bytes in
// `bytes` and their UTF-8 text in `data`.
import {
  BEARER_SUBPROTOCOL_PREFIX,
  decodeOutputFrame,
  type ServerFrame,
  SHELL_SUBPROTOCOL,
} from '@conch/protocol'
import { WebSocket } from 'ws'

/** A frame as received (parsed JSON). */
export type Frame = ServerFrame & Record<string, unknown>

/** A connected shell client. */
export class ShellClient implements AsyncDisposable {
  readonly ws: WebSocket
  readonly frames: Frame[] = []
  #waiters: { match: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = []
  #seen = 0
  readonly closed: Promise<{ code: number; reason: string }>

  private constructor(ws: WebSocket) {
    this.ws = ws
    ws.on('message', (data, isBinary) => {
      const frame = isBinary ? binaryFrame(data as Buffer) : (JSON.parse(String(data)) as Frame)
      this.frames.push(frame)
      this.#waiters = this.#waiters.filter((w) => {
        if (!w.match(frame)) return true
        w.resolve(frame)
        return false
      })
    })
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
    )
  }

  /** Opens a shell socket; `secret` goes in a `bearer.` subprotocol unless `header` is set. */
  static open(
    url: string,
    secret: string,
    options: { header?: boolean; autoPong?: boolean } = {},
  ): Promise<ShellClient> {
    const autoPong = options.autoPong ?? true
    const ws = options.header
      ? new WebSocket(url, [SHELL_SUBPROTOCOL], { headers: { authorization: `Bearer ${secret}` }, autoPong })
      : new WebSocket(url, [SHELL_SUBPROTOCOL, `${BEARER_SUBPROTOCOL_PREFIX}${secret}`], { autoPong })
    const client = new ShellClient(ws)
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(client))
      ws.once('unexpected-response', (req, res) => {
        req.destroy()
        reject(new Error(`HTTP ${res.statusCode}`))
      })
      ws.once('error', reject)
    })
  }

  /** Sends a frame (or raw text). */
  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame))
  }

  /** Resolves with the first frame (already received after the last `next`, or future) that matches. */
  next(match: (f: Frame) => boolean): Promise<Frame> {
    for (let i = this.#seen; i < this.frames.length; i++) {
      const frame = this.frames[i]!
      if (match(frame)) {
        this.#seen = i + 1
        return Promise.resolve(frame)
      }
    }
    return new Promise((resolve) => {
      this.#waiters.push({
        match,
        resolve: (f) => {
          this.#seen = this.frames.length
          resolve(f)
        },
      })
    })
  }

  /** Waits for a frame of `type` (optionally with run `id`). */
  nextOf(type: string, id?: string): Promise<Frame> {
    return this.next((f) => f.type === type && (id === undefined || f.id === id))
  }

  /** Runs a command and resolves with its stdout, stderr and exit frame. */
  async run(id: string, command: string): Promise<{ stdout: string; stderr: string; code: number }> {
    const from = this.frames.length
    this.send({ type: 'shell_run', id, command })
    const exit = await this.nextOf('shell_exit', id)
    const mine = this.frames.slice(from).filter((f) => f.id === id)
    const text = (t: string) =>
      mine
        .filter((f) => f.type === t)
        .map((f) => String(f.data))
        .join('')
    return { stdout: text('shell_out'), stderr: text('shell_err'), code: Number(exit.code) }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) {
      this.ws.close()
      await this.closed
    }
  }
}

/** A binary output frame as a frame record; an undecodable one becomes `{type: 'bad_binary'}`. */
function binaryFrame(data: Buffer): Frame {
  const read = decodeOutputFrame(data)
  if (!read.ok) return { type: 'bad_binary', message: read.message } as unknown as Frame
  const { stream, id, offset, data: bytes } = read.frame
  return {
    type: stream === 'stdout' ? 'shell_out' : 'shell_err',
    id,
    offset,
    data: Buffer.from(bytes).toString('utf8'),
    bytes: Buffer.from(bytes),
    binary: true,
  } as Frame
}
