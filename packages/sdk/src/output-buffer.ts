// The buffered half of a run's output: raw bytes kept up to a cap per stream, decoded once at
// the end. Keeping bytes (not decoded text) makes the cut exact: it falls on a UTF-8 character
// boundary, and decoding the kept bytes in one go gives the same text a streaming decoder
// would, so a character split across frames arrives whole.

const EMPTY = new Uint8Array(0)

/** Collects one stream's bytes, keeping at most `capBytes`. */
export class OutputBuffer {
  /** Bytes the command wrote, including any cut part. */
  totalBytes = 0
  /** True once the kept bytes hit the cap. */
  truncated = false
  readonly #capBytes: number
  #chunks: Uint8Array[] = []
  #kept = 0

  constructor(capBytes: number) {
    this.#capBytes = capBytes
  }

  /** Adds bytes in arrival order. */
  push(bytes: Uint8Array): void {
    this.totalBytes += bytes.length
    if (this.truncated) return
    const room = this.#capBytes - this.#kept
    if (bytes.length <= room) {
      this.#chunks.push(bytes)
      this.#kept += bytes.length
      return
    }
    this.truncated = true
    if (room > 0) {
      this.#chunks.push(bytes.subarray(0, room))
      this.#kept += room
    }
  }

  /** The kept bytes; when cut, they end on a UTF-8 character boundary if `text` is set. */
  bytes(text: boolean): Uint8Array {
    const all = concat(this.#chunks, this.#kept)
    return this.truncated && text ? all.subarray(0, utf8Boundary(all)) : all
  }
}

/** Joins chunks into one fresh array. */
export function concat(chunks: readonly Uint8Array[], length?: number): Uint8Array {
  if (chunks.length === 0) return EMPTY
  if (chunks.length === 1 && chunks[0]) return chunks[0].slice()
  const out = new Uint8Array(length ?? chunks.reduce((n, c) => n + c.length, 0))
  let at = 0
  for (const c of chunks) {
    out.set(c, at)
    at += c.length
  }
  return out
}

/** The largest length ≤ `bytes.length` that does not end inside a UTF-8 sequence. */
export function utf8Boundary(bytes: Uint8Array): number {
  const end = bytes.length
  // Walk back over at most three continuation bytes to the sequence's lead byte.
  for (let i = end - 1; i >= 0 && i >= end - 4; i--) {
    const b = bytes[i] ?? 0
    if ((b & 0xc0) === 0x80) continue
    const need = b >= 0xf8 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1
    return end - i >= need ? end : i
  }
  return end
}
