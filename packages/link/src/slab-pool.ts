// Slabs the link reads into, and the leases on the payloads it hands out of them.
//
// A slab's memory is read into again only when nothing handed out of it can still be read:
// every payload view a reader hands out counts against its slab until the payload's lease is
// released. A consumer that is done with a payload (it decoded it, or the kernel took the
// write that sent it on) releases the lease; a consumer that keeps the payload, or does not
// know about leases, never releases it, and the slab is then left to the garbage collector
// like any other buffer. So reuse is opt-in per payload and a forgotten release costs memory,
// never bytes.
//
// Why reuse at all: every new buffer the runner reads into counts as external memory, and V8
// starts a full garbage collection each time some tens of MB of it accumulate. Streaming at
// hundreds of MB/s through fresh buffers spent most of the runner's CPU in those collections.

/** Slabs kept for reuse across all readers; beyond this a free slab is left to the collector. */
export const POOLED_SLABS = 4

/** A slab and the payloads handed out of it that are not released yet. */
export class Slab {
  /** The memory. */
  readonly bytes: Buffer
  /** Payload views handed out and not released. */
  outstanding = 0
  /** The reader has moved on to another slab: once nothing is outstanding it may be pooled. */
  retired = false
  readonly #pool: SlabPool | null

  /** A slab over `bytes`, returned to `pool` (if any) once retired and released. */
  constructor(bytes: Buffer, pool: SlabPool | null) {
    this.bytes = bytes
    this.#pool = pool
  }

  /** One payload view was released. */
  unref(): void {
    this.outstanding -= 1
    if (this.outstanding === 0 && this.retired) this.#pool?.give(this)
  }

  /** The reader moved on; pooled at once when nothing is outstanding. */
  retire(): void {
    this.retired = true
    if (this.outstanding === 0) this.#pool?.give(this)
  }
}

/** A bounded free list of slabs of one size, shared by the readers that use it. */
export class SlabPool {
  /** Size of every slab of this pool. */
  readonly slabBytes: number
  readonly #max: number
  readonly #free: Slab[] = []

  /** A pool of `slabBytes`-sized slabs that keeps at most `maxSlabs` free ones. */
  constructor(slabBytes: number, maxSlabs: number = POOLED_SLABS) {
    this.slabBytes = slabBytes
    this.#max = maxSlabs
  }

  /** Free slabs held. */
  get size(): number {
    return this.#free.length
  }

  /** A free slab (a pooled one, or a new one) with nothing outstanding. */
  take(): Slab {
    const slab = this.#free.pop()
    if (slab === undefined) return new Slab(Buffer.allocUnsafeSlow(this.slabBytes), this)
    slab.retired = false
    return slab
  }

  /** Takes back a retired slab with nothing outstanding (dropped when the pool is full). */
  give(slab: Slab): void {
    if (slab.bytes.byteLength !== this.slabBytes || this.#free.length >= this.#max) return
    if (this.#free.includes(slab)) return
    this.#free.push(slab)
  }
}

/**
 * The right to one payload's bytes. `release()` says the consumer will not read the payload
 * again (nor will anything it handed the payload to), so its slab may be read into again.
 * Releasing twice is harmless.
 */
export class PayloadLease {
  #slab: Slab | null
  /** Where the payload starts in the slab, and its length. */
  readonly #at: number
  readonly #length: number
  /** Bytes before the payload that belong to its frame alone (length fields, JSON header). */
  readonly #headroom: number

  /**
   * A lease on the payload at `bytes[at, at + length)` of `slab` (counted by the caller), whose
   * frame's own `headroom` bytes (already decoded, never handed out) come just before it.
   */
  constructor(slab: Slab, at: number, length: number, headroom: number) {
    this.#slab = slab
    this.#at = at
    this.#length = length
    this.#headroom = headroom
  }

  /** Gives the payload back; call it only once nothing reads it any more. */
  readonly release = (): void => {
    const slab = this.#slab
    if (slab === null) return
    this.#slab = null
    slab.unref()
  }

  /**
   * Writes `header` over the frame's own bytes just before the payload and returns one view of
   * header then payload, so both go on as one buffer without a copy; null when the header does
   * not fit there or the lease was released. Call it at most once per lease: a second call
   * writes over the first one's header.
   */
  prepend(header: Uint8Array): Buffer | null {
    const slab = this.#slab
    if (slab === null || header.byteLength > this.#headroom) return null
    const start = this.#at - header.byteLength
    slab.bytes.set(header, start)
    return slab.bytes.subarray(start, this.#at + this.#length)
  }
}
