// JSON.parse for the headers of the agent's link frames, with the frames of every run read by
// hand. Each run brings the runner three headers from the agent (the `{}` that acknowledges the
// streamed run, `shell_start`, `shell_exit`; output brings one per chunk), written by the
// agent's JSON.stringify in a fixed layout. `readRunFrame` reads exactly that layout: one key
// sequence per frame type, no whitespace, strings without escapes, integers of at most 15
// digits, and builds the object JSON.parse would (the same keys in the same order, the same
// values). Any other text, whatever the reason (another layout, an escape, a longer number, a
// truncation), is left to JSON.parse, so `readAgentHeader` answers exactly as JSON.parse does
// for every text (a test feeds both the same hostile texts). What the object then must be is
// still decided by the frame parser (agent-frame-parser.ts): this only reads JSON. V8's
// JSON.parse took 0.2-0.3 us per header here, most of it building objects key by key.

/** The value of the number the last `readInt`/`readNumber` read. */
let value = 0

/**
 * Reads a non-negative integer of 1 to 15 digits without a leading zero (or `0`) at `at`;
 * returns the index after it, or -1. The caller's next literal rejects a fraction or exponent.
 */
function readInt(text: string, at: number): number {
  let c = text.charCodeAt(at)
  if (c === 48) {
    value = 0
    return at + 1
  }
  if (!(c >= 49 && c <= 57)) return -1
  let n = 0
  let i = at
  while (c >= 48 && c <= 57) {
    n = n * 10 + (c - 48)
    c = text.charCodeAt(++i)
  }
  if (i - at > 15) return -1
  value = n
  return i
}

/** Reads digits from `at`; returns the index after them (`at` when there are none). */
function digits(text: string, at: number): number {
  let i = at
  let c = text.charCodeAt(i)
  while (c >= 48 && c <= 57) c = text.charCodeAt(++i)
  return i
}

/** Reads a JSON number at `at` (RFC 8259 grammar); returns the index after it, or -1. */
function readNumber(text: string, at: number): number {
  let i = at
  if (text.charCodeAt(i) === 45) i += 1
  const first = text.charCodeAt(i)
  if (first === 48) i += 1
  else if (first >= 49 && first <= 57) i = digits(text, i + 1)
  else return -1
  if (text.charCodeAt(i) === 46) {
    const end = digits(text, i + 1)
    if (end === i + 1) return -1
    i = end
  }
  const e = text.charCodeAt(i)
  if (e === 101 || e === 69) {
    i += 1
    const sign = text.charCodeAt(i)
    if (sign === 43 || sign === 45) i += 1
    const end = digits(text, i)
    if (end === i) return -1
    i = end
  }
  // The same correctly rounded conversion of the same decimal text as JSON.parse's.
  value = Number(text.slice(at, i))
  return i
}

/** The index of the quote that closes a string without escapes or control characters opened before `at`, or -1. */
function stringEnd(text: string, at: number): number {
  for (let i = at; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 34) return i
    if (c === 92 || c < 32) return -1
  }
  return -1
}

/** The index after `literal` when it is at `at`, or -1. */
function expect(text: string, at: number, literal: string): number {
  return at >= 0 && text.startsWith(literal, at) ? at + literal.length : -1
}

/** Whether the text ends with the `}` at `at`. */
function closes(text: string, at: number): boolean {
  return at >= 0 && at === text.length - 1 && text.charCodeAt(at) === 125
}

const RESULT = '{"type":"result","id":'
const START = '{"type":"shell_start","id":"'
const OUT = '{"type":"shell_out","id":'
const ERR = '{"type":"shell_err","id":'
const EXIT = '{"type":"shell_exit","id":"'

/**
 * The object JSON.parse would make of `text` when it is a run frame in the agent's layout;
 * undefined for any other text (JSON.parse then decides).
 */
export function readRunFrame(text: string): unknown {
  if (text.startsWith(EXIT)) return readExit(text)
  if (text.startsWith(START)) return readStart(text)
  if (text.startsWith(RESULT)) {
    const i = readInt(text, RESULT.length)
    const id = value
    return closes(text, expect(text, i, ',"result":{}')) ? { type: 'result', id, result: {} } : undefined
  }
  if (text.startsWith(OUT)) return readOutput(text, 'shell_out', OUT.length)
  if (text.startsWith(ERR)) return readOutput(text, 'shell_err', ERR.length)
  return undefined
}

/** `{"type":"shell_start","id":"…","offset":N,"ch":N}` */
function readStart(text: string): unknown {
  const end = stringEnd(text, START.length)
  if (end < 0) return undefined
  let i = readInt(text, expect(text, end, '","offset":'))
  if (i < 0) return undefined
  const offset = value
  i = readInt(text, expect(text, i, ',"ch":'))
  if (!closes(text, i)) return undefined
  return { type: 'shell_start', id: text.slice(START.length, end), offset, ch: value }
}

/** `{"type":"shell_out","id":"…"|null,"offset":N,"ch":N}` (or `shell_err`). */
function readOutput(text: string, type: 'shell_out' | 'shell_err', at: number): unknown {
  let id: string | null = null
  let i: number
  if (text.charCodeAt(at) === 34) {
    const end = stringEnd(text, at + 1)
    if (end < 0) return undefined
    id = text.slice(at + 1, end)
    i = end + 1
  } else {
    i = expect(text, at, 'null')
  }
  i = readInt(text, expect(text, i, ',"offset":'))
  if (i < 0) return undefined
  const offset = value
  i = readInt(text, expect(text, i, ',"ch":'))
  if (!closes(text, i)) return undefined
  return { type, id, offset, ch: value }
}

/** `{"type":"shell_exit","id":"…","code":N,"timedOut":B,"durationMs":X,"offset":N[,"oomKilled":B],"ch":N}` */
function readExit(text: string): unknown {
  const end = stringEnd(text, EXIT.length)
  if (end < 0) return undefined
  let i = readInt(text, expect(text, end, '","code":'))
  if (i < 0) return undefined
  const code = value
  i = expect(text, i, ',"timedOut":')
  if (i < 0) return undefined
  const timedOut = text.startsWith('true', i)
  i = timedOut ? i + 4 : expect(text, i, 'false')
  i = readNumber(text, expect(text, i, ',"durationMs":'))
  if (i < 0) return undefined
  const durationMs = value
  i = readInt(text, expect(text, i, ',"offset":'))
  if (i < 0) return undefined
  const offset = value
  const id = text.slice(EXIT.length, end)
  if (text.startsWith(',"oomKilled":', i)) {
    i += 13
    const oomKilled = text.startsWith('true', i)
    i = oomKilled ? i + 4 : expect(text, i, 'false')
    i = readInt(text, expect(text, i, ',"ch":'))
    if (!closes(text, i)) return undefined
    return { type: 'shell_exit', id, code, timedOut, durationMs, offset, oomKilled, ch: value }
  }
  i = readInt(text, expect(text, i, ',"ch":'))
  if (!closes(text, i)) return undefined
  return { type: 'shell_exit', id, code, timedOut, durationMs, offset, ch: value }
}

/** Parses an agent frame header's JSON text exactly as JSON.parse does (and throws as it does). */
export function readAgentHeader(text: string): unknown {
  const frame = readRunFrame(text)
  return frame === undefined ? JSON.parse(text) : frame
}
