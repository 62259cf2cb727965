// The link's read side for a socket the link opened itself: reads land in large slabs, and
// frames are decoded where they landed.
//
// A socket created with Node's `onread` option reads into memory we hand it instead of a fresh
// buffer per read. The reader hands it the unused tail of the current slab, so a frame that
// straddles two reads continues in place and is decoded as one view, with no copy; a payload
// given to the endpoint is a view into the slab.
//
// Bytes are never rewritten while a payload holding them may still be read: a consumer may keep
// a payload (the runner's WebSocket send queue does, until the kernel takes it) while more
// reads arrive. Each payload comes with a lease (slab-pool.ts); a slab is read into again only
// once every payload handed out of it was released, and one with a payload never released is
// left to the garbage collector. Only the bytes after the last complete frame (which nobody was
// given) move: when the tail has less room than one read, or than the frame being read needs,
// the slab starts over with those bytes at its front if nothing of it is outstanding, or a
// pooled or new slab starts with a copy of them. So a read costs no allocation, a frame no
// copy, and a slab at most one partial frame's copy. When every byte read was handed out and
// released, the next read goes to the slab's front, so an idle link touches only its first
// pages; a slab a burst filled past half is then swapped for a fresh one, so a link that once
// streamed does not keep a whole slab resident. Bytes of an oversized frame are skipped as they arrive, into room that is then read
// into again; a slab is at most one maximum frame plus one read.
import type { DecodeResult, HeaderReader } from './frame-codec.ts'
import { decodeBody, frameTooLarge, readU32 } from './frame-codec.ts'
import { PayloadLease, Slab, SlabPool } from './slab-pool.ts'

/** Size of a new slab. */
export const SLAB_BYTES = 1024 * 1024

/** Least room a read is offered; a smaller tail starts a new slab. */
export const MIN_READ_BYTES = 64 * 1024

/** The pool of default-sized slabs every reader without its own pool shares. */
const SHARED_POOL = new SlabPool(SLAB_BYTES)

/** Receives each frame (or frame error) as it is decoded. */
export type SlabSink = (result: DecodeResult) => void

/** Sizes of a slab reader (tests use small ones to reach slab boundaries quickly). */
export interface SlabReaderOptions {
  /** Size of a new slab (default `SLAB_BYTES`). */
  slabBytes?: number
  /** Least room a read is offered (default `MIN_READ_BYTES`). */
  minReadBytes?: number
  /** Where free slabs come from and go to (default: one shared by every reader of default size). */
  pool?: SlabPool
}

/**
 * Decodes frames in place from reads into slabs. A socket drives it through `room()` (where
 * the next read goes) and `wrote(n)` (that read brought `n` bytes); frames go to the sink, or
 * wait undecoded in the slab until one is attached.
 */
export class SlabReader {
  #maxFrameBytes = 0
  readonly #pool: SlabPool
  readonly #minRead: number
  #slab: Slab | null = null
  /** First byte of the frame being read; bytes before it were handed out or skipped. */
  #start = 0
  /** End of the bytes read into the slab. */
  #fill = 0
  /** Bytes the frame at `#start` needs in all (4 until its length field is read). */
  #need = 4
  /** Bytes of an oversized frame still to skip. */
  #skipping = 0
  /** The furthest `#fill` reached in this slab since it was taken (how much of it was touched). */
  #highWater = 0
  #sink: SlabSink | null = null
  #readHeader: HeaderReader = JSON.parse

  /** A reader with the given sizes. */
  constructor(options: SlabReaderOptions = {}) {
    const slabBytes = options.slabBytes ?? SLAB_BYTES
    this.#pool = options.pool ?? (slabBytes === SLAB_BYTES ? SHARED_POOL : new SlabPool(slabBytes))
    this.#minRead = Math.min(options.minReadBytes ?? MIN_READ_BYTES, this.#pool.slabBytes)
  }

  /** Bytes read and not yet handed out as frames (a partial frame, or all before a sink attaches). */
  get bufferedBytes(): number {
    return this.#fill - this.#start
  }

  /** Whether a sink is attached (without one, reads are kept and not decoded). */
  get attached(): boolean {
    return this.#sink !== null
  }

  /**
   * Starts handing frames to `sink`, the ones already read first; frames over `maxFrameBytes`
   * are skipped and reported as FRAME_TOO_LARGE; headers are read with `readHeader`.
   */
  attach(sink: SlabSink, maxFrameBytes: number, readHeader: HeaderReader = JSON.parse): void {
    this.#maxFrameBytes = maxFrameBytes
    this.#readHeader = readHeader
    this.#sink = sink
    this.#decode()
  }

  /**
   * Where the next read goes: the slab's unused tail, or (see `#renew`) room made for the
   * partial frame when the tail is too small for a read or for the frame being read.
   */
  room(): Buffer {
    const slab = this.#slab
    if (
      slab === null ||
      slab.bytes.byteLength - this.#fill < this.#minRead ||
      slab.bytes.byteLength - this.#start < this.#need
    ) {
      this.#renew()
    }
    return this.#slab!.bytes.subarray(this.#fill)
  }

  /** The last read put `n` bytes at the start of `room()`; decodes what they complete. */
  wrote(n: number): void {
    if (n <= 0) return
    const at = this.#fill
    this.#fill += n
    if (this.#skipping > 0) {
      // Everything before these bytes was handed out or skipped, so `#start === at`.
      const skip = Math.min(this.#skipping, n)
      this.#skipping -= skip
      this.#start = at + skip
      if (this.#start === this.#fill) {
        // Skipped bytes were never handed out: their room is read into again.
        this.#start = at
        this.#fill = at
        return
      }
    }
    if (this.#fill > this.#highWater) this.#highWater = this.#fill
    this.#decode()
    // Everything read was handed out and given back: the next read starts at the front again.
    const slab = this.#slab!
    if (this.#start === this.#fill && slab.outstanding === 0) {
      this.#start = 0
      this.#fill = 0
      if (this.#highWater > this.#pool.slabBytes / 2) {
        // A burst touched most of this slab; an idle link should not keep those pages
        // resident, so it goes to the pool (or the collector) and a fresh one takes over.
        slab.retire()
        this.#slab = new Slab(Buffer.allocUnsafeSlow(this.#pool.slabBytes), this.#pool)
        this.#highWater = 0
      }
    }
  }

  #decode(): void {
    const sink = this.#sink
    const slab = this.#slab
    if (sink === null || slab === null) return
    const bytes = slab.bytes
    for (;;) {
      const available = this.#fill - this.#start
      if (available < 4) {
        this.#need = 4
        return
      }
      const length = readU32(bytes, this.#start)
      if (length > this.#maxFrameBytes) {
        const skip = Math.min(length, available - 4)
        this.#skipping = length - skip
        this.#start += 4 + skip
        this.#need = 4
        sink(frameTooLarge(length, this.#maxFrameBytes))
        // The rest of the frame arrives later and is skipped in `wrote`.
        if (this.#skipping > 0) return
        continue
      }
      if (available - 4 < length) {
        this.#need = 4 + length
        return
      }
      const frameStart = this.#start
      const body = frameStart + 4
      this.#start = body + length
      const result = decodeBody(bytes, body, body + length, this.#readHeader)
      if (result.ok && result.frame.payload.byteLength > 0) {
        const payload = result.frame.payload
        slab.outstanding += 1
        const at = payload.byteOffset - bytes.byteOffset
        result.frame.lease = new PayloadLease(slab, at, payload.byteLength, at - frameStart)
      }
      sink(result)
    }
  }

  /**
   * Makes room: moves the bytes not handed out yet to the front of this slab when nothing of it
   * is outstanding, else into a pooled or new slab (the old one is pooled once released).
   */
  #renew(): void {
    const pending = this.#fill - this.#start
    const size = Math.max(this.#pool.slabBytes, this.#need + this.#minRead, pending + this.#minRead)
    const old = this.#slab
    if (old !== null && old.outstanding === 0 && old.bytes.byteLength >= size) {
      old.bytes.copyWithin(0, this.#start, this.#fill)
    } else {
      const next =
        size === this.#pool.slabBytes ? this.#pool.take() : new Slab(Buffer.allocUnsafeSlow(size), null)
      if (old !== null) {
        if (pending > 0) old.bytes.copy(next.bytes, 0, this.#start, this.#fill)
        old.retire()
      }
      this.#slab = next
      this.#highWater = pending
    }
    this.#start = 0
    this.#fill = pending
  }
}
