import { TextDecoder } from 'node:util'
import type { Encoding, StreamName } from '@conch/protocol'

/**
 * Turns output bytes into strings for one consumer. `utf8` keeps a streaming TextDecoder per
 * stream, so a multi-byte character split across chunks arrives whole; `base64` is lossless.
 */
export class OutputDecoder {
  /** The encoding produced. */
  readonly encoding: Encoding
  readonly #stdout: TextDecoder | null
  readonly #stderr: TextDecoder | null

  /** Creates a decoder for `encoding`. */
  constructor(encoding: Encoding) {
    this.encoding = encoding
    this.#stdout = encoding === 'utf8' ? new TextDecoder('utf-8') : null
    this.#stderr = encoding === 'utf8' ? new TextDecoder('utf-8') : null
  }

  /** Decodes a chunk of `stream`; may hold back the start of a split character. */
  decode(stream: StreamName, bytes: Uint8Array): string {
    const decoder = stream === 'stdout' ? this.#stdout : this.#stderr
    if (decoder) return decoder.decode(bytes, { stream: true })
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')
  }

  /** Emits what a stream holds back (an incomplete character becomes U+FFFD). */
  flush(stream: StreamName): string {
    const decoder = stream === 'stdout' ? this.#stdout : this.#stderr
    return decoder ? decoder.decode() : ''
  }
}
