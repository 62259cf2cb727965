// Finds end markers in one output stream of a bash session.
//
// Model: bash writes a marker after each run, on the same pipe as the command's own output.
// A marker is `\x1f C <nonce> \x1e` on stderr and `\x1f C <nonce> : <3-digit $?> \x1e` on
// stdout, where the nonce is 32 lowercase hex digits chosen at random per run. The scanner
// knows which nonces it expects; bytes that merely look like a marker (any other nonce) are
// output. A chunk tail that could still become an expected marker is held back until the
// next chunk decides it, so a marker split across chunks is found and never shown.

/** First byte of every marker. */
const MARKER_START = 0x1f
/** Second byte of every marker. */
const MARKER_TAG = 0x43 // 'C'
/** Last byte of every marker. */
const MARKER_END = 0x1e
/** Length of a nonce in hex digits. */
export const NONCE_LENGTH = 32
const COLON = 0x3a
const DIGIT_0 = 0x30
const DIGIT_9 = 0x39

/** One piece of a scanned chunk: output bytes, or a marker with its nonce (and `$?` on stdout). */
export type ScanItem =
  | { kind: 'data'; bytes: Buffer }
  | { kind: 'marker'; nonce: string; exitCode: number | null }

/** Whether a stream's markers carry an exit code (stdout) or not (stderr). */
export type MarkerFlavor = 'with-code' | 'plain'

/** Length of a complete marker of the given flavor. */
export function markerLength(flavor: MarkerFlavor): number {
  return 2 + NONCE_LENGTH + (flavor === 'with-code' ? 4 : 0) + 1
}

/** Streaming marker finder for one stream; feed it chunks in arrival order. */
export class MarkerScanner {
  readonly #flavor: MarkerFlavor
  readonly #length: number
  /** Expected nonces: strings, so a marker is one lookup and expecting or forgetting allocates nothing. */
  readonly #expected = new Set<string>()
  #held: Buffer = Buffer.alloc(0)

  /** `flavor` is `with-code` for stdout and `plain` for stderr. */
  constructor(flavor: MarkerFlavor) {
    this.#flavor = flavor
    this.#length = markerLength(flavor)
  }

  /** Bytes held back because they may start a marker. */
  get heldBytes(): number {
    return this.#held.length
  }

  /** Adds a nonce to look for. */
  expect(nonce: string): void {
    this.#expected.add(nonce)
  }

  /**
   * Stops looking for a nonce. Returns held-back bytes that can no longer become a marker,
   * so the caller can deliver them as output.
   */
  forget(nonce: string): Buffer {
    this.#expected.delete(nonce)
    if (this.#held.length === 0) return this.#held
    if (this.#couldStartMarker(this.#held, 0)) return Buffer.alloc(0)
    const out = this.#held
    this.#held = Buffer.alloc(0)
    return out
  }

  /** Returns and clears everything held back (the stream ended). */
  flush(): Buffer {
    const out = this.#held
    this.#held = Buffer.alloc(0)
    return out
  }

  /** Scans a chunk and returns its output bytes and markers in order. */
  push(chunk: Buffer): ScanItem[] {
    let buf = chunk
    if (this.#held.length > 0) {
      buf = Buffer.concat([this.#held, chunk])
      this.#held = Buffer.alloc(0)
    }
    const items: ScanItem[] = []
    if (this.#expected.size === 0) {
      if (buf.length > 0) items.push({ kind: 'data', bytes: buf })
      return items
    }
    let emitFrom = 0
    let searchFrom = 0
    while (searchFrom < buf.length) {
      const p = buf.indexOf(MARKER_START, searchFrom)
      if (p < 0) break
      if (buf.length - p < this.#length) {
        if (this.#couldStartMarker(buf, p)) {
          this.#held = Buffer.from(buf.subarray(p))
          if (p > emitFrom) items.push({ kind: 'data', bytes: buf.subarray(emitFrom, p) })
          return items
        }
        searchFrom = p + 1
        continue
      }
      const found = this.#matchAt(buf, p)
      if (found === null) {
        searchFrom = p + 1
        continue
      }
      if (p > emitFrom) items.push({ kind: 'data', bytes: buf.subarray(emitFrom, p) })
      items.push(found)
      emitFrom = p + this.#length
      searchFrom = emitFrom
    }
    if (emitFrom < buf.length) items.push({ kind: 'data', bytes: buf.subarray(emitFrom) })
    return items
  }

  /** A complete expected marker at `p` (the buffer holds at least a marker's length from `p`). */
  #matchAt(buf: Buffer, p: number): ScanItem | null {
    if (buf[p + 1] !== MARKER_TAG) return null
    const nonceAt = p + 2
    // latin1 maps each byte to one character, so equal strings mean equal bytes.
    const nonce = buf.toString('latin1', nonceAt, nonceAt + NONCE_LENGTH)
    if (!this.#expected.has(nonce)) return null
    let at = nonceAt + NONCE_LENGTH
    let exitCode: number | null = null
    if (this.#flavor === 'with-code') {
      if (buf[at] !== COLON) return null
      exitCode = 0
      for (let i = 1; i <= 3; i++) {
        const d = buf[at + i]!
        if (d < DIGIT_0 || d > DIGIT_9) return null
        exitCode = exitCode * 10 + (d - DIGIT_0)
      }
      at += 4
    }
    if (buf[at] !== MARKER_END) return null
    return { kind: 'marker', nonce, exitCode }
  }

  /** Whether some expected nonce starts with `prefix`. */
  #couldStartNonce(prefix: string): boolean {
    for (const nonce of this.#expected) if (nonce.startsWith(prefix)) return true
    return false
  }

  /** Whether the bytes from `p` to the end are a prefix of some expected marker. */
  #couldStartMarker(buf: Buffer, p: number): boolean {
    const n = buf.length - p
    if (n >= this.#length) return false
    if (n >= 2 && buf[p + 1] !== MARKER_TAG) return false
    const nonceBytes = Math.min(Math.max(n - 2, 0), NONCE_LENGTH)
    if (!this.#couldStartNonce(buf.toString('latin1', p + 2, p + 2 + nonceBytes))) return false
    let at = p + 2 + NONCE_LENGTH
    if (this.#flavor === 'with-code' && at < buf.length) {
      if (buf[at] !== COLON) return false
      for (let i = 1; i <= 3 && at + i < buf.length; i++) {
        const d = buf[at + i]!
        if (d < DIGIT_0 || d > DIGIT_9) return false
      }
      at += 4
    }
    // A complete marker is never passed here, so the end byte is never part of the tail.
    return at >= buf.length
  }
}
