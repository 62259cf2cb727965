// What one shell WebSocket sends: server frames as JSON text (framed here, see
// web-socket-text-frame.ts), binary output messages, and error frames. Frames produced in one
// tick leave in one write: the tick's text frames are held and framed into one buffer at its
// end (one socket write for a short run's `shell_start` and `shell_exit`, or a burst of
// pipelined exits, not one each). A tick that only sends text writes that buffer straight to
// the raw TCP socket under the WebSocket, without corking it (Node's cork buffers the write
// and replays it on uncork: allocations and stream work on every run's way out); a tick that
// also sends through ws (binary output) corks the socket on its first such send and uncorks at
// its end, so all of it still leaves in one write. Anything else this sender writes first
// writes the held text, and so must the connection before ws writes a close frame (`flush`).
// While the connection holds output credit back, each send asks ws to report its completion,
// which lets the connection grant the credit once the socket drains.
import type { Duplex } from 'node:stream'
import type { PayloadLease } from '@conch/link'
import type { ServerFrame, WireError } from '@conch/protocol'
import type { WebSocket } from 'ws'
import { textFrame, textFrames } from './web-socket-text-frame.ts'

/** What a frame sender writes to and reports to. */
export interface ShellFrameSenderOptions {
  /** The open WebSocket. */
  ws: WebSocket
  /**
   * The raw socket under it (the one ws writes to): corked to batch a tick's frames, and text
   * frames are written to it directly. Null sends everything through ws, uncorked.
   */
  socket: Duplex | null
  /** An error frame is about to go out (metrics). */
  onError: (code: WireError['code']) => void
  /** Whether the connection waits for sends to complete (it holds credit back). */
  awaitingFlush: () => boolean
  /** A send the connection waited for completed. */
  onFlushed: () => void
  /** The tick's frames are about to be written: last chance to add one to the same write. */
  beforeUncork?: () => void
  /** The tick's frames were written (or dropped, the socket being closed): work that waited for them. */
  afterWrite?: () => void
}

/** Sends a shell socket's frames, batched per tick; nothing once closed. */
export class ShellFrameSender {
  readonly #ws: WebSocket
  readonly #socket: Duplex | null
  readonly #options: ShellFrameSenderOptions
  readonly #onFlushed: () => void
  #closed = false
  /** The socket is corked until the end of this tick (something went through ws). */
  #corked = false
  /** The end of this tick is scheduled (`#endOfTick`). */
  #tickQueued = false
  /** Text messages of this tick not yet framed: they leave together, in one write, at its end. */
  #texts: string[] = []
  readonly #endOfTick = (): void => {
    this.#tickQueued = false
    this.#options.beforeUncork?.()
    this.flush()
    if (this.#corked) {
      this.#corked = false
      this.#socket?.uncork()
    }
    this.#options.afterWrite?.()
  }

  /** A sender on `options.ws`. */
  constructor(options: ShellFrameSenderOptions) {
    this.#ws = options.ws
    this.#socket = options.socket
    this.#options = options
    this.#onFlushed = options.onFlushed
  }

  /** Bytes ws has queued and not yet handed to the socket. */
  get bufferedAmount(): number {
    return this.#ws.bufferedAmount
  }

  /** Sends nothing from now on (the connection is torn down). */
  close(): void {
    this.#closed = true
  }

  /** Sends one server frame as JSON. */
  send(frame: ServerFrame): void {
    this.sendData(JSON.stringify(frame))
  }

  /** Sends an error frame for run `id` (null: not about one run). */
  sendError(
    id: string | null,
    code: WireError['code'],
    message: string,
    details?: Record<string, unknown>,
  ): void {
    this.#options.onError(code)
    this.send({ type: 'error', id, code, message, ...(details ? { details } : {}) })
  }

  /**
   * Sends a text frame (a string) or a binary one (a Buffer). With the raw socket, text frames
   * are framed here and written to it directly (web-socket-text-frame.ts), the tick's together
   * in one buffer at its end, or before anything else this sender writes: ws writes whole
   * frames to that socket too, so frames never interleave, and they leave in the order sent.
   */
  sendData(data: string | Buffer): void {
    if (this.#closed || this.#ws.readyState !== 1) return
    const awaiting = this.#options.awaitingFlush()
    const socket = this.#socket
    if (socket !== null && typeof data === 'string' && !awaiting) {
      this.#queueEndOfTick()
      this.#texts.push(data)
      return
    }
    this.#cork()
    this.flush()
    if (socket === null || typeof data !== 'string') {
      if (awaiting) this.#ws.send(data, this.#onFlushed)
      else this.#ws.send(data)
      return
    }
    const frame = textFrame(data)
    if (Buffer.isBuffer(frame)) {
      if (awaiting) socket.write(frame, this.#onFlushed)
      else socket.write(frame)
      return
    }
    socket.write(frame[0])
    if (awaiting) socket.write(frame[1], 'utf8', this.#onFlushed)
    else socket.write(frame[1], 'utf8')
  }

  /**
   * Sends a binary output message without copying the payload (a view into the agent link's
   * read). With a lease, the header goes into the link frame's own bytes just before the
   * payload and the message is one WebSocket frame; otherwise it goes as two fragments, header
   * then payload, back to back in one corked write (no other message can fall between them).
   * The lease is released once the write holding the payload is done (the kernel has the
   * bytes, or the socket failed), so the link may read into that memory again.
   */
  sendBinary(header: Uint8Array, payload: Uint8Array, lease: PayloadLease | undefined): void {
    if (this.#closed || this.#ws.readyState !== 1) {
      lease?.release()
      return
    }
    this.#cork()
    this.flush()
    const awaiting = this.#options.awaitingFlush()
    if (lease === undefined) {
      this.#ws.send(header, { binary: true, fin: false })
      if (awaiting) this.#ws.send(payload, { binary: true, fin: true }, this.#onFlushed)
      else this.#ws.send(payload, { binary: true, fin: true })
      return
    }
    const flushed = awaiting
      ? () => {
          lease.release()
          this.#onFlushed()
        }
      : lease.release
    const message = lease.prepend(header)
    if (message !== null) {
      this.#ws.send(message, { binary: true }, flushed)
      return
    }
    this.#ws.send(header, { binary: true, fin: false })
    this.#ws.send(payload, { binary: true, fin: true }, flushed)
  }

  /**
   * Writes the text messages held for the end of the tick now, in one buffer; call it before
   * anything else writes to the socket (ws's close frame). Nothing is written once ws is
   * closing: a text frame after a close frame would break the WebSocket framing.
   */
  flush(): void {
    const texts = this.#texts
    if (texts.length === 0) return
    this.#texts = []
    if (this.#ws.readyState !== 1) return
    this.#socket!.write(textFrames(texts))
  }

  /**
   * Asks for the end of this tick even when nothing is sent in it: `beforeUncork`, then the
   * write, then `afterWrite` run then, closed socket or not.
   */
  atEndOfTick(): void {
    this.#queueEndOfTick()
  }

  /** The tick's held text and corked writes leave at its end. */
  #queueEndOfTick(): void {
    if (!this.#tickQueued) {
      this.#tickQueued = true
      process.nextTick(this.#endOfTick)
    }
  }

  /** Frames produced in one tick leave in one write: corks the socket until the tick's end. */
  #cork(): void {
    this.#queueEndOfTick()
    if (this.#socket && !this.#corked) {
      this.#corked = true
      this.#socket.cork()
    }
  }
}
