// Reused memory for bash's output reads, and the leases that say when it may be read into again.
//
// Why: a pipe read through Node's stream gets a fresh 64 KiB buffer, and every fresh buffer counts
// as V8 external memory; each few tens of MB of it start a full collection of the agent's heap.
// Streaming at hundreds of MB/s, those collections were the agent's largest cost after the
// kernel's. Reads into pooled buffers allocate nothing once the pool is warm.
//
// Model: one read fills one `ReadLease`'s buffer. Whoever keeps a view of those bytes past the
// read (the output log's record, an attached channel's queue or a frame the kernel has not taken
// yet) holds a reference (`acquire`) and gives it back when done (`release`). The buffer is read
// into again only when the reader moved on and no reference is left. A holder that never
// releases (a view kept by code that does not know about leases, a frame whose write is still
// pending) leaves the buffer to the garbage collector: a missed release costs memory, never
// bytes. Code that keeps a view without a lease must copy it instead.

/** Size of one read buffer: libuv's own read size. */
export const READ_BUFFER_BYTES = 64 * 1024

/** Free buffers the pool keeps; beyond this a freed buffer is left to the collector. */
export const POOLED_READ_BUFFERS = 16

const leases = new WeakMap<ArrayBuffer, ReadLease>()

/** The lease of the buffer `view` looks into, if it is a pooled read buffer. */
export function leaseOf(view: Uint8Array): ReadLease | undefined {
  return leases.get(view.buffer as ArrayBuffer)
}

/** One pooled read buffer and the references to the bytes read into it. */
export class ReadLease {
  /** The memory reads go into. */
  readonly bytes: Buffer
  /** Holders of views into `bytes`. */
  #refs = 0
  /** The reader moved on: once no reference is left, the buffer goes back to the pool. */
  #lent = false
  readonly #pool: ReadBufferPool

  /** A lease over `bytes`, given back to `pool`. */
  constructor(bytes: Buffer, pool: ReadBufferPool) {
    this.bytes = bytes
    this.#pool = pool
    leases.set(bytes.buffer as ArrayBuffer, this)
  }

  /** Holders of views into the buffer. */
  get refs(): number {
    return this.#refs
  }

  /** A holder keeps a view of the bytes. */
  acquire(): void {
    this.#refs += 1
  }

  /** A holder is done with its view. */
  release(): void {
    this.#refs -= 1
    if (this.#refs === 0 && this.#lent) {
      this.#lent = false
      this.#pool.give(this)
    }
  }

  /** The reader moved on to another buffer; pooled once no reference is left. */
  lend(): void {
    if (this.#refs === 0) this.#pool.give(this)
    else this.#lent = true
  }
}

/** A bounded free list of read buffers, shared by every reader of an agent. */
export class ReadBufferPool {
  readonly #max: number
  readonly #free: ReadLease[] = []

  /** Keeps at most `maxFree` free buffers. */
  constructor(maxFree: number = POOLED_READ_BUFFERS) {
    this.#max = maxFree
  }

  /** Free buffers held. */
  get size(): number {
    return this.#free.length
  }

  /** A buffer nobody holds a view of. */
  take(): ReadLease {
    return this.#free.pop() ?? new ReadLease(Buffer.allocUnsafeSlow(READ_BUFFER_BYTES), this)
  }

  /** Takes back a buffer nobody holds a view of (dropped when the pool is full). */
  give(lease: ReadLease): void {
    if (lease.refs !== 0 || this.#free.length >= this.#max || this.#free.includes(lease)) return
    this.#free.push(lease)
  }
}

/** The pool every bash process of this agent reads into. */
export const SHARED_READ_BUFFERS = new ReadBufferPool()
