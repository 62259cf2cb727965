// Keeps injected credentials out of what a host sends back to the sandbox.
//
// A host that reflects requests (an echo endpoint, an error page quoting the Authorization
// header) would hand the sandbox the very secret the proxy added. Every byte string that is a
// secret (each injected value, and for `<scheme> <token>` values the token alone) is replaced by
// `[redacted]` in the response head and body, also percent-encoded or JSON-escaped, and a
// Basic credential also decoded (user:password, and the password alone). The body is scanned as a stream: the last
// (longest secret - 1) bytes of a chunk are held back until the next one, so a secret split
// across chunks is still found. The proxy asks for an unencoded body (`accept-encoding:
// identity`) and refuses an encoded one, since compressed bytes cannot be scanned. A host that
// transforms the value (hashes, re-encodes it) is outside this; see docs/SECURITY.md.
import { Transform, type TransformCallback } from 'node:stream'

/** What a redacted secret is replaced with. */
export const REDACTED = Buffer.from('[redacted]')

/** Values shorter than this are not scanned for: they would match ordinary text. */
const MIN_SECRET_BYTES = 6

/**
 * The forms a host commonly quotes a value in besides its own bytes: percent-encoded (a URL or
 * form field, such as a redirect's `Location`; upper- or lower-case hex) and JSON-escaped (`/`
 * as `\/` too, as PHP does).
 */
function quotedForms(value: string): string[] {
  const json = JSON.stringify(value).slice(1, -1)
  const percent = encodeURIComponent(value)
  const lowerPercent = percent.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase())
  return [value, percent, lowerPercent, json, json.replaceAll('/', '\\/')]
}

/** The byte strings to redact for a set of injected header values. */
export function secretsOf(values: Iterable<string>): Buffer[] {
  const out = new Set<string>()
  for (const value of values) {
    const plain = [value]
    const [, scheme, token] = /^([A-Za-z][A-Za-z0-9-]*)\s+(\S.*)$/.exec(value) ?? []
    if (token) plain.push(token)
    // A Basic credential is a password in base64; a host may well show it decoded.
    if (token && scheme?.toLowerCase() === 'basic') {
      const decoded = Buffer.from(token, 'base64').toString('utf8')
      plain.push(decoded, decoded.slice(decoded.indexOf(':') + 1))
    }
    for (const p of plain) for (const form of quotedForms(p)) out.add(form)
  }
  return [...out]
    .filter((s) => Buffer.byteLength(s) >= MIN_SECRET_BYTES)
    .sort((a, b) => b.length - a.length)
    .map((s) => Buffer.from(s))
}

/** `text` with every secret replaced; `null` secrets list means nothing to do. */
export function redactText(text: string, secrets: readonly Buffer[]): string {
  let out = text
  for (const s of secrets) out = out.split(s.toString()).join(REDACTED.toString())
  return out
}

function replaceAll(buffer: Buffer, secrets: readonly Buffer[]): Buffer {
  let out = buffer
  for (const s of secrets) {
    if (out.indexOf(s) < 0) continue
    const parts: Buffer[] = []
    let at = 0
    for (let i = out.indexOf(s); i >= 0; i = out.indexOf(s, at)) {
      parts.push(out.subarray(at, i), REDACTED)
      at = i + s.length
    }
    parts.push(out.subarray(at))
    out = Buffer.concat(parts)
  }
  return out
}

/** A stream that passes bytes through with every secret replaced by `[redacted]`. */
export class Redactor extends Transform {
  readonly #secrets: readonly Buffer[]
  readonly #keep: number
  #tail: Buffer = Buffer.alloc(0)

  /** Redacts `secrets` (see `secretsOf`). */
  constructor(secrets: readonly Buffer[]) {
    super()
    this.#secrets = secrets
    this.#keep = Math.max(0, ...secrets.map((s) => s.length - 1))
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    const joined = replaceAll(Buffer.concat([this.#tail, chunk]), this.#secrets)
    // Hold back what could be the start of a secret that ends in the next chunk.
    const cut = Math.max(0, joined.length - this.#keep)
    this.#tail = joined.subarray(cut)
    callback(null, cut > 0 ? joined.subarray(0, cut) : undefined)
  }

  override _flush(callback: TransformCallback): void {
    callback(null, this.#tail.length > 0 ? this.#tail : undefined)
  }
}
