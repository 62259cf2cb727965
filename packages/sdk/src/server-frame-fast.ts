import type { IncomingFrame } from './server-frame.ts'

// Hand-written checks of the frames every run brings (`shell_exit`, `shell_start`), so the hot
// path skips the generic schema walk (which builds a path string per field and writes its
// result through megamorphic stores). Each check only ever accepts: it returns the frame exactly
// as the schema check would (known keys in schema order, unknown keys dropped), or `undefined`
// for anything it is not sure of, and the schema check then decides. So a fast path can never
// accept what the schema rejects; server-frame-fast.test.ts holds both to the same answers over
// hostile inputs.

type Exit = Extract<IncomingFrame, { type: 'shell_exit' }>
type Start = Extract<IncomingFrame, { type: 'shell_start' }>

/** An own property's value, as the schema check reads it (a missing key reads `undefined`). */
const own = (v: object, key: string): unknown =>
  Object.hasOwn(v, key) ? (v as Record<string, unknown>)[key] : undefined

/** A run id as the schema has it: a string of 1 to 128 characters. */
const isRunId = (v: unknown): v is string => typeof v === 'string' && v.length >= 1 && v.length <= 128

/** An offset or other count: a safe integer, at least 0. */
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0

/** A `shell_exit` frame exactly as the schema check returns it, or `undefined`: ask the schema. */
export function fastShellExit(v: object): Exit | undefined {
  const id = own(v, 'id')
  const code = own(v, 'code')
  const timedOut = own(v, 'timedOut')
  const durationMs = own(v, 'durationMs')
  const offset = own(v, 'offset')
  if (
    !isRunId(id) ||
    !Number.isSafeInteger(code) ||
    (code as number) < 0 ||
    (code as number) > 255 ||
    typeof timedOut !== 'boolean' ||
    typeof durationMs !== 'number' ||
    !Number.isFinite(durationMs) ||
    durationMs < 0 ||
    !isCount(offset)
  )
    return undefined
  const oomKilled = own(v, 'oomKilled')
  const startOffset = own(v, 'startOffset')
  if (oomKilled !== undefined && typeof oomKilled !== 'boolean') return undefined
  if (startOffset !== undefined && !isCount(startOffset)) return undefined
  const frame: Exit = { type: 'shell_exit', id, code: code as number, timedOut, durationMs, offset }
  if (oomKilled !== undefined) frame.oomKilled = oomKilled
  if (startOffset !== undefined) frame.startOffset = startOffset
  return frame
}

/** A `shell_start` frame exactly as the schema check returns it, or `undefined`: ask the schema. */
export function fastShellStart(v: object): Start | undefined {
  const id = own(v, 'id')
  const offset = own(v, 'offset')
  if (!isRunId(id) || !isCount(offset)) return undefined
  return { type: 'shell_start', id, offset }
}
