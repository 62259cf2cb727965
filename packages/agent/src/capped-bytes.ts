// A byte accumulator with a cap: keeps the first `cap` bytes of a stream and counts the rest.
// The kept bytes are cut on a UTF-8 character boundary when the cap cuts the stream, so a
// truncated text result never ends in half a character.

/** Accumulates a stream's bytes up to a cap, counting every byte. */
export class CappedBytes {
  readonly #cap: number
  #chunks: Buffer[] = []
  #kept = 0
  #total = 0

  /** Keeps at most `cap` bytes. */
  constructor(cap: number) {
    this.#cap = cap
  }

  /** Every byte appended so far, kept or not. */
  get totalBytes(): number {
    return this.#total
  }

  /** Whether bytes were dropped. */
  get truncated(): boolean {
    return this.#total > this.#kept
  }

  /** Appends bytes, keeping what fits under the cap. */
  append(bytes: Buffer): void {
    this.#total += bytes.length
    const room = this.#cap - this.#kept
    if (room <= 0) return
    const part = bytes.length <= room ? bytes : bytes.subarray(0, room)
    this.#chunks.push(Buffer.from(part))
    this.#kept += part.length
  }

  /** The kept bytes; cut back to a character boundary when the stream was truncated. */
  bytes(): Buffer {
    const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks)
    if (!this.truncated) return all
    return all.subarray(0, utf8Boundary(all))
  }
}

/** Length of the longest prefix of `buf` that does not end inside a UTF-8 sequence. */
export function utf8Boundary(buf: Buffer): number {
  const end = buf.length
  for (let back = 1; back <= 4 && back <= end; back++) {
    const b = buf[end - back]!
    if ((b & 0xc0) === 0x80) continue // continuation byte: keep looking for its lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1
    return need > back ? end - back : end
  }
  return end
}
