import {
  arr,
  bool,
  nullable,
  num,
  obj,
  oneOf,
  opt,
  record,
  type Shape,
  ShapeError,
  str,
  unknownValue,
} from './wire-shape.ts'

// The frames the runner sends on the shell socket, checked field by field like the protocol's
// `ServerFrame` schema. Two fields are deliberately open: `hello.capabilities` and
// `error.code` accept any string, so a newer runner that grows either list additively does
// not break an older SDK. Unknown frame types are reported as `null` and skipped for the
// same reason.

const offset = num({ int: true, min: 0 })
const runId = str({ min: 1, max: 128 })
const sessionId = str({ pattern: /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/ })
const encoding = oneOf(['utf8', 'base64'])

const output = <T extends 'shell_out' | 'shell_err'>(type: T) =>
  obj({ type: oneOf([type]), id: nullable(runId), data: str(), offset })

const SHAPES = {
  hello: obj({
    type: oneOf(['hello']),
    protocolVersion: num({ int: true, min: 1 }),
    capabilities: arr(str()),
  }),
  shell_ready: obj({
    type: oneOf(['shell_ready']),
    sessionId,
    offset,
    encoding,
    running: nullable(runId),
  }),
  shell_start: obj({ type: oneOf(['shell_start']), id: runId, offset }),
  shell_out: output('shell_out'),
  shell_err: output('shell_err'),
  shell_exit: obj({
    type: oneOf(['shell_exit']),
    id: runId,
    code: num({ int: true, min: 0, max: 255 }),
    timedOut: bool,
    durationMs: num({ min: 0 }),
    offset,
    oomKilled: opt(bool),
  }),
  shell_closed: obj({
    type: oneOf(['shell_closed']),
    code: nullable(num({ int: true })),
    signal: nullable(str()),
    reason: str(),
  }),
  scrollback_end: obj({ type: oneOf(['scrollback_end']), offset }),
  error: obj({
    type: oneOf(['error']),
    id: nullable(str()),
    code: str(),
    message: str(),
    details: opt(record(unknownValue)),
  }),
  ping: obj({ type: oneOf(['ping']), t: opt(num()) }),
  pong: obj({ type: oneOf(['pong']), t: opt(num()) }),
} as const

type Shapes = typeof SHAPES
/** A frame from the runner, as the SDK reads it. */
export type IncomingFrame = {
  [K in keyof Shapes]: Shapes[K] extends Shape<infer T> ? T : never
}[keyof Shapes]

const hasShape = (type: string): type is keyof Shapes => Object.hasOwn(SHAPES, type)

/** The outcome of reading one socket message. */
export type FrameReadResult = { ok: true; frame: IncomingFrame | null } | { ok: false; message: string }

/**
 * Parses one text message from the shell socket. Never throws: bad JSON or a bad field is
 * `{ok: false}`, an unknown `type` is `{ok: true, frame: null}` (skipped for forward
 * compatibility).
 */
export function readServerFrame(text: string): FrameReadResult {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { ok: false, message: 'frame is not valid JSON' }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, message: 'frame is not a JSON object' }
  }
  const type: unknown = 'type' in value ? value.type : undefined
  if (typeof type !== 'string') return { ok: false, message: 'frame has no string "type"' }
  if (!hasShape(type)) return { ok: true, frame: null }
  try {
    return { ok: true, frame: SHAPES[type](value, '') }
  } catch (err) {
    if (err instanceof ShapeError) return { ok: false, message: `invalid "${type}" frame: ${err.message}` }
    throw err
  }
}
