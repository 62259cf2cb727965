import type { z } from 'zod'
import type { WireError } from './error-codes.ts'

/** The outcome of parsing an untrusted frame. */
export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: WireError }

/**
 * Parses an untrusted value against a frame union discriminated on `key`. Never throws:
 * a non-object or a missing discriminator is INVALID_FRAME, an unknown discriminator value is
 * UNKNOWN_FRAME_TYPE, and a known frame with bad fields is INVALID_FRAME naming the fields.
 */
export function parseFrame<S extends z.ZodType>(
  schema: S,
  value: unknown,
  key: string,
  knownTypes: readonly string[],
): ParseResult<z.infer<S>> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, error: { code: 'INVALID_FRAME', message: 'a frame must be a JSON object' } }
  }
  const kind: unknown = (value as Record<string, unknown>)[key]
  if (typeof kind !== 'string') {
    return { ok: false, error: { code: 'INVALID_FRAME', message: `a frame needs a string "${key}" field` } }
  }
  if (!knownTypes.includes(kind)) {
    return {
      ok: false,
      error: {
        code: 'UNKNOWN_FRAME_TYPE',
        message: `unknown frame ${key} "${kind.slice(0, 64)}"; expected one of ${knownTypes.join(', ')}`,
      },
    }
  }
  const parsed = schema.safeParse(value)
  if (parsed.success) return { ok: true, value: parsed.data }
  const fields = parsed.error.issues
    .slice(0, 5)
    .map((i) => `${i.path.join('.') || '(frame)'}: ${i.message}`)
    .join('; ')
  return { ok: false, error: { code: 'INVALID_FRAME', message: `invalid "${kind}" frame: ${fields}` } }
}

/** Parses a WebSocket text message as JSON and then as a frame; never throws. */
export function parseJsonFrame<S extends z.ZodType>(
  schema: S,
  text: string,
  key: string,
  knownTypes: readonly string[],
  maxBytes: number,
): ParseResult<z.infer<S>> {
  if (text.length > maxBytes) {
    return {
      ok: false,
      error: { code: 'FRAME_TOO_LARGE', message: `frame exceeds the ${maxBytes}-byte limit` },
    }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { ok: false, error: { code: 'INVALID_FRAME', message: 'frame is not valid JSON' } }
  }
  return parseFrame(schema, value, key, knownTypes)
}
