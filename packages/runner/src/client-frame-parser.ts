// The runner's parser of a shell client's text frames. A client is untrusted, so each frame is
// checked against the protocol's `ClientFrame` before the runner acts on it. zod does that for
// every frame type; the frames of every run (`shell_run`, and `ack` from clients that
// acknowledge output) first meet a hand-written check that accepts only frames zod accepts and
// builds the object zod would (the schema's fields in its order, unknown fields dropped).
// Anything else goes to zod, which decides and words the error, so every answer is zod's (a
// test feeds both the same hostile frames). Before JSON.parse, the SDK's common `shell_run` text
// (`{"type":"shell_run","id":"…","command":"…"}`, neither string escaped) is read by hand into
// that same frame: JSON.parse built an object key by key that the check then copied.
import {
  CLIENT_FRAME_TYPES,
  ClientFrame,
  type ParseResult,
  parseFrame,
  parseJsonFrame,
  type ShellRun,
} from '@conch/protocol'
import { isCount, isRunId } from './quick-field-checks.ts'

/** The largest timeout (`TimeoutMs`). */
const MAX_TIMEOUT_MS = 2_147_483_647

/**
 * Parses a client's text frame exactly as `parseJsonFrame(ClientFrame, …)` does: FRAME_TOO_LARGE
 * past `maxBytes` characters, INVALID_FRAME for bad JSON or fields, UNKNOWN_FRAME_TYPE. Never throws.
 */
export function parseClientFrame(text: string, maxBytes: number): ParseResult<ClientFrame> {
  if (text.length <= maxBytes) {
    const run = readPlainRun(text)
    if (run !== undefined) return { ok: true, value: run }
  }
  let value: unknown
  try {
    value = text.length > maxBytes ? undefined : JSON.parse(text)
  } catch {
    value = undefined
  }
  // Too long or not JSON: zod's own entry point words the error.
  if (value === undefined) return parseJsonFrame(ClientFrame, text, 'type', CLIENT_FRAME_TYPES, maxBytes)
  const frame = quickFrame(value)
  if (frame !== undefined) return { ok: true, value: frame }
  return parseFrame(ClientFrame, value, 'type', CLIENT_FRAME_TYPES)
}

const RUN_ID_AT = '{"type":"shell_run","id":"'
const RUN_COMMAND_AT = '","command":"'

/** The index of the `"` that ends a JSON string with no escape or control character, from `at`; else -1. */
function plainStringEnd(text: string, at: number): number {
  for (let i = at; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 34) return i
    if (c === 92 || c < 32) return -1
  }
  return -1
}

/**
 * The frame zod would return for `text` when it is exactly `{"type":"shell_run","id":"…",
 * "command":"…"}` (the SDK's common run frame) with neither string escaped and a valid id;
 * else undefined. Such a JSON string's value is its text between the quotes.
 */
export function readPlainRun(text: string): ShellRun | undefined {
  if (!text.startsWith(RUN_ID_AT)) return undefined
  const idEnd = plainStringEnd(text, RUN_ID_AT.length)
  if (idEnd < 0 || !text.startsWith(RUN_COMMAND_AT, idEnd)) return undefined
  const at = idEnd + RUN_COMMAND_AT.length
  const end = plainStringEnd(text, at)
  if (end < 0 || end !== text.length - 2 || text.charCodeAt(end + 1) !== 125) return undefined
  const id = text.slice(RUN_ID_AT.length, idEnd)
  if (!isRunId(id)) return undefined
  return { type: 'shell_run', id, command: text.slice(at, end) }
}

/** `value` as zod would return it when it is a run's frame and surely valid; else undefined. */
function quickFrame(value: unknown): ClientFrame | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const h = value as Record<string, unknown>
  if (h.type === 'shell_run') return quickRun(h)
  if (h.type === 'ack') {
    return isCount(h.offset) ? { type: 'ack', offset: h.offset } : undefined
  }
  return undefined
}

function quickRun(h: Record<string, unknown>): ShellRun | undefined {
  const { id, command, timeoutMs, stdin, stdinEncoding, stdinPipe } = h
  if (!isRunId(id)) return undefined
  if (typeof command !== 'string') return undefined
  const frame: ShellRun = { type: 'shell_run', id, command }
  if (timeoutMs !== undefined) {
    if (!Number.isSafeInteger(timeoutMs) || (timeoutMs as number) <= 0) return undefined
    if ((timeoutMs as number) > MAX_TIMEOUT_MS) return undefined
    frame.timeoutMs = timeoutMs as number
  }
  if (stdin !== undefined) {
    if (typeof stdin !== 'string') return undefined
    frame.stdin = stdin
  }
  if (stdinEncoding !== undefined) {
    if (stdinEncoding !== 'utf8' && stdinEncoding !== 'base64') return undefined
    frame.stdinEncoding = stdinEncoding
  }
  if (stdinPipe !== undefined) {
    if (typeof stdinPipe !== 'boolean') return undefined
    frame.stdinPipe = stdinPipe
  }
  return frame
}
