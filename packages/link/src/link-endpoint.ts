// One end of the runner↔agent link, the same class in both roles.
//
// It owns the byte stream: it decodes incoming frames with the one codec and parses each with
// the role's parser of incoming frames (the runner's is zod's `parseFrame`; the agent's is the
// zod-free checker of JSON Schema generated from the same schemas; the peer is untrusted: the agent shares its sandbox with
// user code, and anything may connect to the agent's socket), writes typed outgoing frames,
// batches writes, and keeps the heartbeat. What the frames mean (calls, channels, the
// handshake) belongs to the role built on top of it.
//
// Writes: frames without a payload (calls, results, credit, events) written in one tick leave
// in one writev: the stream is corked on the first of them and uncorked on the next tick. A
// frame with a payload flushes at once, header and payload as two chunks of one writev, so a
// chunk of output is never copied into a frame and a producer learns at once whether the
// kernel took it. A frame sent `lazy` (news nobody waits for: a run's start, the `{}` that
// acknowledges a streamed run) waits in the cork for the next frame that is not lazy, or at
// most `LAZY_FLUSH_MS`: a short run's start then leaves with its exit in one write, and the
// peer wakes once per run instead of twice. Frames always leave in the order they were sent.
//
// Heartbeats: once `live()` is called (after the handshake), the endpoint answers `ping` with
// `pong` itself and, given an interval, sends a `ping` each interval and closes the link when
// two go unanswered. Before that, `ping` and `pong` reach `onFrame` like any other frame, so a
// role can refuse them before its handshake.
import type { Duplex } from 'node:stream'
import type { ParseResult, WireError } from '@conch/protocol'
import { LIMITS } from '@conch/protocol/zod-free'
import {
  type DecodeResult,
  encodeFrameHead,
  FrameDecoder,
  type HeaderReader,
  type Payload,
  payloadBytes,
} from './frame-codec.ts'
import { slabReaderOf } from './link-socket.ts'
import type { PayloadLease } from './slab-pool.ts'

/**
 * Longest a lazy frame waits in the cork for a frame that is not lazy. Its timer is re-armed,
 * not re-created, and wakes the process at most once per this interval; a short interval would
 * cost a wake-up every few runs. Clearing the timer when a flush carries the lazy frames out
 * would not save that wake-up: Node leaves its one libuv timer armed for a cleared timer's
 * expiry (measured: a cleared 10 ms timeout still ends `epoll_wait` 10 ms later).
 */
export const LAZY_FLUSH_MS = 10

/** Every link frame is a JSON object discriminated on `type`, as on the WebSocket. */
export interface LinkFrame {
  /** The frame type. */
  type: string
}

/** A heartbeat frame, which both roles' unions contain. */
export type HeartbeatFrame = { type: 'ping'; n: number } | { type: 'pong'; n: number }

/**
 * Parses an untrusted frame header into a frame the peer may send (e.g. `HostFrame` on the
 * agent), or says why not: INVALID_FRAME, UNKNOWN_FRAME_TYPE. Never throws.
 */
export type FrameParser<In> = (header: unknown) => ParseResult<In>

/** What a role hands its endpoint. */
export interface LinkEndpointOptions<In extends LinkFrame> {
  /** The parser of the frames the peer may send. */
  parse: FrameParser<In>
  /** Largest frame accepted; larger ones are skipped and reported as FRAME_TOO_LARGE. */
  maxFrameBytes?: number
  /**
   * Reads a frame header's JSON text before `parse` checks it: JSON.parse by default, or a
   * reader that answers exactly as JSON.parse does, faster for the peer's common frames.
   */
  readHeader?: HeaderReader
  /**
   * A parsed frame and its payload (a view into the read buffer). `lease` is set when that
   * buffer is read into again once the lease is released (see slab-pool.ts): release it when
   * nothing reads the payload any more, or never, and the buffer is not reused.
   */
  onFrame: (frame: In, payload: Uint8Array, lease: PayloadLease | undefined) => void
  /** A frame that could not be decoded or parsed; `header` is its raw JSON when it had one. */
  onBadFrame: (error: WireError, header: unknown) => void
  /** The stream ended or failed, or the heartbeat found the peer dead; called once. */
  onClose?: (reason: string) => void
  /** The stream's buffer drained after a send returned false. */
  onDrain?: () => void
}

/** One end of a link: typed frames out (`Out`), parsed frames in (`In`). */
export class LinkEndpoint<Out extends LinkFrame, In extends LinkFrame> {
  readonly #stream: Duplex
  /** Decodes chunks from `data` events; null when the socket reads into slabs. */
  readonly #decoder: FrameDecoder | null
  readonly #options: LinkEndpointOptions<In>
  #closed: string | null = null
  /** The stream is corked by this endpoint (frames wait in it). */
  #corked = false
  /** An uncork is scheduled for the end of this tick. */
  #flushQueued = false
  /** Flushes lazy frames that no other frame carried out in time; armed while only they wait. */
  #lazyTimer: NodeJS.Timeout | undefined
  #live = false
  #heartbeat: NodeJS.Timeout | undefined
  #pingOutstanding = 0
  #pingSeq = 0
  readonly #uncork = (): void => {
    this.#flushQueued = false
    if (!this.#corked) return
    this.#corked = false
    this.#stream.uncork()
  }
  readonly #flushLazy = (): void => {
    if (!this.#flushQueued) this.#uncork()
  }

  /** Takes over `stream`: from now on every chunk it delivers is decoded here. */
  constructor(stream: Duplex, options: LinkEndpointOptions<In>) {
    this.#stream = stream
    this.#options = options
    const maxFrameBytes = options.maxFrameBytes ?? LIMITS.maxAgentFrameBytes
    const reader = slabReaderOf(stream)
    if (reader) {
      // Frames are decoded in place, in the slab the socket read into (see slab-reader.ts).
      this.#decoder = null
      reader.attach(this.#take, maxFrameBytes, options.readHeader)
      stream.resume()
    } else {
      this.#decoder = new FrameDecoder(maxFrameBytes, options.readHeader)
      stream.on('data', (chunk: Buffer) => this.#receive(chunk))
    }
    stream.on('drain', () => options.onDrain?.())
    stream.on('error', (error) => this.#finish(`link failed: ${error.message}`))
    stream.on('close', () => this.#finish('the peer closed the link'))
  }

  /** True until the stream closes. */
  get open(): boolean {
    return this.#closed === null
  }

  /** Why the link closed; null while it is open. */
  get closeReason(): string | null {
    return this.#closed
  }

  /**
   * Writes one frame. Returns false when the link is closed or the stream's buffer is full
   * (`writableHighWaterMark`): a producer then pauses until `onDrain`. A `lazy` frame (no
   * payload) leaves with the next frame that is not lazy, or after `LAZY_FLUSH_MS`.
   */
  send(frame: Out, payload?: Payload, lazy = false): boolean {
    const stream = this.#stream
    if (this.#closed !== null || stream.destroyed) return false
    const size = payloadBytes(payload)
    const head = encodeFrameHead(frame, size)
    if (size > 0) {
      if (!this.#corked) stream.cork()
      stream.write(head)
      if (payload instanceof Uint8Array) stream.write(payload)
      else for (const piece of payload!) if (piece.byteLength > 0) stream.write(piece)
      this.#corked = false
      stream.uncork()
    } else {
      if (!this.#corked) {
        this.#corked = true
        stream.cork()
        if (lazy && !this.#flushQueued) this.#armLazy()
      }
      if (!lazy && !this.#flushQueued) {
        this.#flushQueued = true
        process.nextTick(this.#uncork)
      }
      stream.write(head)
    }
    return !stream.destroyed && stream.writableLength < stream.writableHighWaterMark
  }

  /** Bounds the wait of lazy frames corked with no flush queued (one timer, re-armed). */
  #armLazy(): void {
    if (this.#lazyTimer === undefined) {
      this.#lazyTimer = setTimeout(this.#flushLazy, LAZY_FLUSH_MS)
      this.#lazyTimer.unref()
    } else this.#lazyTimer.refresh()
  }

  /** Writes one frame and resolves when the stream can take more; rejects if the link closes first. */
  sendWhenWritable(frame: Out, payload?: Payload): Promise<void> {
    if (this.send(frame, payload)) return Promise.resolve()
    if (this.#closed !== null) return Promise.reject(new Error(this.#closed))
    return new Promise((resolve, reject) => {
      const onDrain = (): void => {
        this.#stream.off('close', onClose)
        resolve()
      }
      const onClose = (): void => {
        this.#stream.off('drain', onDrain)
        reject(new Error(this.#closed ?? 'the link closed'))
      }
      this.#stream.once('drain', onDrain)
      this.#stream.once('close', onClose)
    })
  }

  /**
   * The handshake is done: answer pings from now on and, given `heartbeatIntervalMs`, ping
   * the peer each interval and close the link when two pings in a row go unanswered.
   */
  live(heartbeatIntervalMs?: number): void {
    this.#live = true
    if (heartbeatIntervalMs === undefined || this.#heartbeat || this.#closed !== null) return
    this.#heartbeat = setInterval(() => this.#beat(), heartbeatIntervalMs)
    this.#heartbeat.unref()
  }

  /** Closes the link (destroys the stream); `onClose` gets `reason`. */
  close(reason = 'closed by this end'): void {
    this.#finish(reason)
  }

  #beat(): void {
    if (this.#pingOutstanding >= 2) {
      this.#finish('the peer stopped answering heartbeats')
      return
    }
    this.#pingOutstanding += 1
    this.#sendHeartbeat({ type: 'ping', n: ++this.#pingSeq })
  }

  /** Both roles' outgoing unions contain the heartbeat frames (checked by the endpoint tests). */
  #sendHeartbeat(frame: HeartbeatFrame): void {
    this.send(frame as unknown as Out)
  }

  #receive(chunk: Buffer): void {
    for (const result of this.#decoder!.push(chunk)) this.#take(result)
  }

  /** Handles one decoded frame (or frame error); nothing once the link is closed. */
  readonly #take = (result: DecodeResult): void => {
    if (!result.ok) {
      if (this.#closed === null) this.#options.onBadFrame(result.error, undefined)
      return
    }
    const { header, payload, lease } = result.frame
    if (this.#closed !== null) {
      lease?.release()
      return
    }
    const parsed = this.#options.parse(header)
    if (!parsed.ok) {
      lease?.release()
      this.#options.onBadFrame(parsed.error, header)
      return
    }
    const frame = parsed.value
    if (this.#live && (frame.type === 'ping' || frame.type === 'pong')) {
      lease?.release()
      const beat = frame as unknown as HeartbeatFrame
      if (beat.type === 'ping') this.#sendHeartbeat({ type: 'pong', n: beat.n })
      else this.#pingOutstanding = 0
      return
    }
    this.#options.onFrame(frame, payload, lease)
  }

  #finish(reason: string): void {
    if (this.#closed !== null) return
    this.#closed = reason
    clearInterval(this.#heartbeat)
    clearTimeout(this.#lazyTimer)
    this.#stream.destroy()
    this.#options.onClose?.(reason)
  }
}
