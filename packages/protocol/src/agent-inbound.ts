// What the agent parses, without zod: runner→agent frames, every method's params and its own
// command line, checked by json-shape.ts against the JSON Schema generated from the protocol's
// zod schemas (agent-inbound-schemas.ts). The agent is one process per sandbox, so zod's
// memory would be paid once per sandbox; these parsers give the same answers as zod's
// (`parseFrame`, `schemaCallParser`, `AgentArgs.safeParse`), with the same error codes, and a
// test feeds both the same hostile input.
import type { AgentArgs } from './agent-args.ts'
import type { HostFrame } from './agent-frames.ts'
import { AGENT_ARGS_SCHEMA, AGENT_PARAM_SCHEMAS, HOST_FRAME_SCHEMAS } from './agent-inbound-schemas.ts'
import type { AgentMethod, AgentParams } from './agent-methods.ts'
import type { ParseResult } from './frame-parse.ts'
import { type Shape, ShapeError, shapeOf } from './json-shape.ts'

/** The `type` of every runner→agent frame. */
export const HOST_FRAME_TYPE_NAMES: readonly string[] = Object.keys(HOST_FRAME_SCHEMAS)

const frameShapes = new Map<string, Shape<HostFrame>>(
  Object.entries(HOST_FRAME_SCHEMAS).map(([type, schema]) => [type, shapeOf<HostFrame>(schema)]),
)

const paramShapes = new Map<string, Shape<unknown>>(
  Object.entries(AGENT_PARAM_SCHEMAS).map(([method, schema]) => [method, shapeOf(schema)]),
)

const argsShape = shapeOf<AgentArgs>(AGENT_ARGS_SCHEMA)

/** `fn(value)`, or the `ShapeError`'s message when it does not match. */
function run<T>(shape: Shape<T>, value: unknown): { ok: true; value: T } | { ok: false; message: string } {
  try {
    return { ok: true, value: shape(value, '') }
  } catch (err) {
    if (err instanceof ShapeError) return { ok: false, message: err.message }
    throw err
  }
}

/**
 * Parses an untrusted runner→agent frame as `parseFrame(HostFrame, …)` does: a non-object or
 * a missing `type` is INVALID_FRAME, an unknown `type` is UNKNOWN_FRAME_TYPE, and a known frame
 * with bad fields is INVALID_FRAME naming the field. Never throws.
 */
export function parseHostFrame(value: unknown): ParseResult<HostFrame> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, error: { code: 'INVALID_FRAME', message: 'a frame must be a JSON object' } }
  }
  const kind: unknown = (value as Record<string, unknown>).type
  if (typeof kind !== 'string') {
    return { ok: false, error: { code: 'INVALID_FRAME', message: 'a frame needs a string "type" field' } }
  }
  const shape = frameShapes.get(kind)
  if (shape === undefined) {
    return {
      ok: false,
      error: {
        code: 'UNKNOWN_FRAME_TYPE',
        message: `unknown frame type "${kind.slice(0, 64)}"; expected one of ${HOST_FRAME_TYPE_NAMES.join(', ')}`,
      },
    }
  }
  const parsed = run(shape, value)
  if (parsed.ok) return parsed
  return {
    ok: false,
    error: { code: 'INVALID_FRAME', message: `invalid "${kind}" frame: ${parsed.message}` },
  }
}

/** Whether `name` is an agent method (own names only: never `__proto__` or `constructor`). */
export function isAgentMethodName(name: string): name is AgentMethod {
  return paramShapes.has(name)
}

/** Parses the params of `method` as its schema in `AGENT_METHODS` does; BAD_REQUEST names the field. */
export function parseAgentParams<M extends AgentMethod>(
  method: M,
  params: unknown,
): ParseResult<AgentParams<M>> {
  const shape = paramShapes.get(method)
  if (shape === undefined)
    return { ok: false, error: { code: 'BAD_REQUEST', message: `unknown method "${method.slice(0, 64)}"` } }
  const parsed = run(shape, params)
  if (parsed.ok) return { ok: true, value: parsed.value as AgentParams<M> }
  return {
    ok: false,
    error: { code: 'BAD_REQUEST', message: `invalid params for ${method}: ${parsed.message}` },
  }
}

/** Parses the agent's arguments (from `argvToRecord`) as `AgentArgs` does. */
export function parseAgentArgs(
  record: Record<string, string>,
): { ok: true; value: AgentArgs } | { ok: false; message: string } {
  return run(argsShape, record)
}
