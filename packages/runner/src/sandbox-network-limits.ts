// Per-sandbox network limits shared by the port relay and the egress proxy: how many relayed
// and egress connections a sandbox may have open at once, and how many bytes per second they
// may move together, each direction.
//
// Connections: `acquire` counts one against the sandbox's cap or throws TOO_MANY_CONNECTIONS;
// the returned function gives it back (once). Bandwidth: a token bucket per sandbox and
// direction, filled at the rate and holding one second's worth. A taker that finds too few
// tokens goes into debt and waits until the debt is repaid, so concurrent takers queue in order
// of arrival without a queue, and a stream that waits stops granting credit: the sandbox (or the
// remote end) is slowed by backpressure, and nothing is buffered beyond one window.
import { RunnerError } from './runner-error.ts'

/** One direction's token bucket. */
export class TokenBucket {
  readonly #rate: number
  #tokens: number
  #at: number
  readonly #now: () => number

  /** A bucket filled at `bytesPerSecond`, holding at most one second's worth. */
  constructor(bytesPerSecond: number, now: () => number = () => performance.now()) {
    this.#rate = bytesPerSecond
    this.#tokens = bytesPerSecond
    this.#now = now
    this.#at = now()
  }

  /** Takes `bytes`; null when they were there, else a promise that resolves once the debt is repaid. */
  take(bytes: number): Promise<void> | null {
    const now = this.#now()
    this.#tokens = Math.min(this.#rate, this.#tokens + ((now - this.#at) / 1000) * this.#rate)
    this.#at = now
    this.#tokens -= bytes
    if (this.#tokens >= 0) return null
    const waitMs = (-this.#tokens / this.#rate) * 1000
    return new Promise((resolve) => setTimeout(resolve, waitMs).unref())
  }
}

/** The buckets of one sandbox. */
export interface SandboxBuckets {
  /** Bytes toward the sandbox (responses to egress, requests to its ports). */
  in: TokenBucket
  /** Bytes from the sandbox. */
  out: TokenBucket
}

/** What the limits are. */
export interface SandboxNetworkLimitsOptions {
  /** Open relay and egress connections per sandbox. */
  maxConnections: number
  /** Bytes per second per direction; 0 for no limit. */
  bandwidthBytesPerSecond: number
}

/** Connection counts and bandwidth buckets for every sandbox of a runner. */
export class SandboxNetworkLimits {
  readonly #o: SandboxNetworkLimitsOptions
  readonly #open = new Map<string, number>()
  readonly #buckets = new Map<string, SandboxBuckets>()

  /** Limits with `options`. */
  constructor(options: SandboxNetworkLimitsOptions) {
    this.#o = options
  }

  /** Counts one connection of `sandboxId`; TOO_MANY_CONNECTIONS at the cap. Returns its release. */
  acquire(sandboxId: string, what: 'relayed' | 'egress'): () => void {
    const open = this.#open.get(sandboxId) ?? 0
    const limit = this.#o.maxConnections
    if (open >= limit)
      throw new RunnerError(
        'TOO_MANY_CONNECTIONS',
        `sandbox ${sandboxId} already has ${open} relayed and egress connections open (the limit is ${limit}); this ${what} connection was refused. Close connections it no longer uses`,
        { details: { limit, value: open } },
      )
    this.#open.set(sandboxId, open + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const n = (this.#open.get(sandboxId) ?? 1) - 1
      if (n <= 0) this.#open.delete(sandboxId)
      else this.#open.set(sandboxId, n)
    }
  }

  /** Connections `sandboxId` has open. */
  open(sandboxId: string): number {
    return this.#open.get(sandboxId) ?? 0
  }

  /** The sandbox's buckets, or null when bandwidth is unlimited. */
  buckets(sandboxId: string): SandboxBuckets | null {
    const rate = this.#o.bandwidthBytesPerSecond
    if (rate <= 0) return null
    let buckets = this.#buckets.get(sandboxId)
    if (!buckets) {
      buckets = { in: new TokenBucket(rate), out: new TokenBucket(rate) }
      this.#buckets.set(sandboxId, buckets)
    }
    return buckets
  }

  /** Drops a destroyed sandbox's buckets. */
  forget(sandboxId: string): void {
    this.#buckets.delete(sandboxId)
  }
}
