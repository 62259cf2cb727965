// Length-prefixed framing for the runner↔agent byte stream: the one encoder and decoder of
// the link, used by both roles.
//
//   u32be length (of everything after this field)
//   u32be headerLength
//   header: UTF-8 JSON (a HostFrame or AgentFrame)
//   payload: raw bytes (length - 4 - headerLength), used by data frames
//
// The decoder never throws on bad input: an oversized frame is skipped byte-exactly and
// reported, a frame with a bad header is reported, and decoding continues with the next frame.
import { Buffer } from 'node:buffer'
import type { WireError } from '@conch/protocol'
import { LIMITS } from '@conch/protocol/zod-free'
import type { PayloadLease } from './slab-pool.ts'

const decoder = new TextDecoder('utf-8', { fatal: true })
const EMPTY = new Uint8Array(0)

/**
 * A frame's payload as the sender hands it over: one buffer, or pieces sent back to back as one
 * frame's payload (written with one writev, never joined into a copy).
 */
export type Payload = Uint8Array | readonly Uint8Array[]

/** Bytes in a payload. */
export function payloadBytes(payload: Payload | undefined): number {
  if (payload === undefined) return 0
  if (payload instanceof Uint8Array) return payload.byteLength
  let n = 0
  for (const piece of payload) n += piece.byteLength
  return n
}

/** One decoded frame: its JSON header (still unparsed by a schema) and its payload. */
export interface DecodedFrame {
  /** The parsed JSON header, `unknown` until a schema parses it. */
  header: unknown
  /** Raw payload bytes; empty for frames without one. */
  payload: Uint8Array
  /**
   * Present when the payload is a view into a slab the link reads into again (slab-reader.ts):
   * release it once nothing reads the payload any more. Without a release the slab is simply
   * never reused.
   */
  lease?: PayloadLease
}

/** What the decoder yields: a frame, or an error for a frame it had to drop. */
export type DecodeResult = { ok: true; frame: DecodedFrame } | { ok: false; error: WireError }

/**
 * The length prefix and JSON header of a frame whose payload has `payloadBytes` bytes. The
 * endpoint writes this and the payload as two chunks of one writev, so a payload is never
 * copied into a frame.
 *
 * The head is allocated at its exact size: small heads come from Node's shared 8 KiB pool, and
 * reserving the worst case (3 bytes per UTF-16 unit) used that pool up three times as fast, each
 * new pool a fresh allocation whose pages the agent then faulted in (about a sixth of the agent's
 * page faults per run in the full stack). `JSON.stringify` escapes lone surrogates, so the
 * string is well-formed and `Buffer.byteLength` is exactly what `write` writes.
 */
export function encodeFrameHead(header: unknown, payloadBytes: number): Buffer {
  const json = JSON.stringify(header)
  const headerBytes = Buffer.byteLength(json)
  const head = Buffer.allocUnsafe(8 + headerBytes)
  head.writeUInt32BE(4 + headerBytes + payloadBytes, 0)
  head.writeUInt32BE(headerBytes, 4)
  head.write(json, 8)
  return head
}

/**
 * Encodes a header and optional payload into one contiguous frame. For tests and hostile peers
 * that write raw bytes; the endpoint uses `encodeFrameHead`.
 */
export function encodeFrame(header: unknown, payload: Uint8Array = EMPTY): Uint8Array {
  const head = encodeFrameHead(header, payload.byteLength)
  const out = new Uint8Array(head.byteLength + payload.byteLength)
  out.set(head, 0)
  if (payload.byteLength > 0) out.set(payload, head.byteLength)
  return out
}

/** The big-endian u32 at `at` (the caller checked that four bytes are there). */
export function readU32(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0
}

/**
 * Parses a frame header's JSON text: `JSON.parse`, or a role's reader that answers exactly as
 * JSON.parse does (same value, same thrown SyntaxError) and reads its peer's common frames
 * faster (the runner's `agent-header-reader.ts`).
 */
export type HeaderReader = (text: string) => unknown

/** Incremental decoder: feed it chunks as they arrive, collect complete frames. */
export class FrameDecoder {
  readonly #maxFrameBytes: number
  readonly #readHeader: HeaderReader
  #chunks: Uint8Array[] = []
  #buffered = 0
  #skipping = 0

  /**
   * `maxFrameBytes` bounds one frame; larger ones are skipped and reported as FRAME_TOO_LARGE.
   * Headers are read with `readHeader`.
   */
  constructor(maxFrameBytes: number = LIMITS.maxAgentFrameBytes, readHeader: HeaderReader = JSON.parse) {
    this.#maxFrameBytes = maxFrameBytes
    this.#readHeader = readHeader
  }

  /** Bytes held while waiting for the rest of a frame. */
  get bufferedBytes(): number {
    return this.#buffered
  }

  /** Adds a chunk and returns every frame (or frame error) it completes. */
  push(chunk: Uint8Array): DecodeResult[] {
    const results: DecodeResult[] = []
    let data = chunk
    if (this.#skipping > 0) {
      const skip = Math.min(this.#skipping, data.byteLength)
      this.#skipping -= skip
      data = data.subarray(skip)
    }
    if (data.byteLength === 0) return results
    if (this.#buffered === 0) {
      // Nothing is held: decode the whole frames in place, and buffer only what follows them.
      let at = 0
      while (data.byteLength - at >= 4) {
        const length = readU32(data, at)
        if (length > this.#maxFrameBytes || data.byteLength - at - 4 < length) break
        results.push(decodeBody(data, at + 4, at + 4 + length, this.#readHeader))
        at += 4 + length
      }
      if (at === data.byteLength) return results
      data = data.subarray(at)
    }
    this.#chunks.push(data)
    this.#buffered += data.byteLength
    while (this.#buffered >= 4) {
      const length = readU32(this.#peek(4), 0)
      if (length > this.#maxFrameBytes) {
        this.#take(4)
        const skip = Math.min(length, this.#buffered)
        this.#take(skip)
        this.#skipping = length - skip
        results.push(frameTooLarge(length, this.#maxFrameBytes))
        continue
      }
      if (this.#buffered < 4 + length) break
      this.#take(4)
      results.push(decodeBody(this.#take(length), 0, length, this.#readHeader))
    }
    return results
  }

  #peek(n: number): Uint8Array {
    const first = this.#chunks[0]!
    if (first.byteLength >= n) return first.subarray(0, n)
    return this.#gather(n, false)
  }

  #take(n: number): Uint8Array {
    if (n === 0) return EMPTY
    const first = this.#chunks[0]!
    if (first.byteLength >= n) {
      const out = first.subarray(0, n)
      if (first.byteLength === n) this.#chunks.shift()
      else this.#chunks[0] = first.subarray(n)
      this.#buffered -= n
      return out
    }
    return this.#gather(n, true)
  }

  #gather(n: number, consume: boolean): Uint8Array {
    const out = new Uint8Array(n)
    let filled = 0
    let i = 0
    while (filled < n) {
      const c = this.#chunks[i]!
      const part = Math.min(c.byteLength, n - filled)
      out.set(c.subarray(0, part), filled)
      filled += part
      if (consume) {
        if (part === c.byteLength) this.#chunks.shift()
        else this.#chunks[0] = c.subarray(part)
      } else {
        i += 1
      }
    }
    if (consume) this.#buffered -= n
    return out
  }
}

/** The error for a frame whose length field claims more than `maxFrameBytes`. */
export function frameTooLarge(length: number, maxFrameBytes: number): DecodeResult {
  return {
    ok: false,
    error: {
      code: 'FRAME_TOO_LARGE',
      message: `frame of ${length} bytes exceeds the ${maxFrameBytes}-byte limit; it was dropped`,
    },
  }
}

/**
 * Decodes the frame body (what follows the length field) that occupies `bytes[start, end)`,
 * reading its header with `readHeader`.
 */
export function decodeBody(
  bytes: Uint8Array,
  start: number,
  end: number,
  readHeader: HeaderReader = JSON.parse,
): DecodeResult {
  if (end - start < 4) {
    return {
      ok: false,
      error: { code: 'INVALID_FRAME', message: 'frame shorter than its header length field' },
    }
  }
  const headerLength = readU32(bytes, start)
  if (headerLength > end - start - 4) {
    return {
      ok: false,
      error: { code: 'INVALID_FRAME', message: `header length ${headerLength} exceeds the frame` },
    }
  }
  const headerEnd = start + 4 + headerLength
  let header: unknown
  try {
    header = readHeader(headerText(bytes, start + 4, headerEnd))
  } catch {
    return { ok: false, error: { code: 'INVALID_FRAME', message: 'frame header is not UTF-8 JSON' } }
  }
  return { ok: true, frame: { header, payload: headerEnd === end ? EMPTY : bytes.subarray(headerEnd, end) } }
}

/**
 * The header `bytes[start, end)` as text; throws when it is not UTF-8. A Buffer (the slabs, a
 * socket's chunks) is decoded in place, without a view per frame: Node replaces every invalid
 * sequence with U+FFFD, so text without one is the bytes' exact decoding, and text with one
 * (rare: a header that really holds U+FFFD, or invalid bytes) goes to the strict decoder.
 */
function headerText(bytes: Uint8Array, start: number, end: number): string {
  if (Buffer.isBuffer(bytes)) {
    const text = bytes.toString('utf8', start, end)
    if (!text.includes('\uFFFD')) return text
  }
  return decoder.decode(bytes.subarray(start, end))
}
