import type { ServerFrame } from '@conch/protocol'
import { type JsonSchema, type Shape, ShapeError, shapeOf } from '@conch/protocol/json-shape'
import { fastShellExit, fastShellStart } from './server-frame-fast.ts'
import { SERVER_FRAME_SCHEMAS } from './wire-schemas.ts'

// The frames the runner sends on the shell socket, checked against the protocol's
// `ServerFrame` schema (generated into wire-schemas.ts). Two fields are deliberately open:
// `hello.capabilities` and `error.code` accept any string, so a newer runner that grows either
// list additively does not break an older SDK. Unknown frame types are reported as `null` and
// skipped for the same reason.

type Open<F, K extends keyof F, T> = Omit<F, K> & { [P in K]: T }

/** A frame from the runner, as the SDK reads it. */
export type IncomingFrame =
  | Exclude<ServerFrame, { type: 'hello' | 'error' }>
  | Open<Extract<ServerFrame, { type: 'hello' }>, 'capabilities', string[]>
  | Open<Extract<ServerFrame, { type: 'error' }>, 'code', string>

/** One checker per frame type, made once (it compiles its schema on first use, once). */
const SHAPES: Readonly<Record<string, Shape<IncomingFrame>>> = Object.fromEntries(
  Object.entries(SERVER_FRAME_SCHEMAS).map(([type, schema]: [string, JsonSchema]) => [type, shapeOf(schema)]),
)

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
  // Every run brings these; their hand-written checks accept a subset of what the schema does.
  const fast =
    type === 'shell_exit' ? fastShellExit(value) : type === 'shell_start' ? fastShellStart(value) : undefined
  if (fast !== undefined) return { ok: true, frame: fast }
  const shape = Object.hasOwn(SHAPES, type) ? SHAPES[type] : undefined
  if (!shape) return { ok: true, frame: null }
  try {
    return { ok: true, frame: shape(value, '') }
  } catch (err) {
    if (err instanceof ShapeError) return { ok: false, message: `invalid "${type}" frame: ${err.message}` }
    throw err
  }
}
