// Generates the protocol's zod-free schema modules from its zod schemas, for processes that
// check untrusted input without shipping zod (the agent; see docs/PROTOCOL.md, "Validation"):
// - src/agent-inbound-schemas.ts: what an agent parses, as JSON Schema: every runner→agent
//   frame (`HostFrame`, by `type`), every agent method's params (`AGENT_METHODS`), and the
//   agent's command line (`AgentArgs`), all as zod parses *input* (`io: 'input'`).
// - src/error-details-schemas.ts: the `details` of every error code (`ERROR_DETAILS`), which
//   `boundedErrorDetails` checks every error's details against.
// `json-shape.ts` checks a value against them. What JSON Schema cannot say is carried by two
// extension keywords: `x-coerce` for `z.coerce.number()`, and `x-refine` for a refinement,
// named by its entry in `refinements.ts` (the zod schemas refine with those very functions).
// Any other keyword, an unnamed refinement, or a transform fails generation, so no rule of a
// schema is silently dropped. Run `pnpm --filter @conch/protocol generate` after changing a
// schema; a test fails while a generated file is stale.
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'
import { AgentArgs } from '../src/agent-args.ts'
import { HostFrame } from '../src/agent-frames.ts'
import { AGENT_METHODS } from '../src/agent-methods.ts'
import { ERROR_DETAILS } from '../src/error-details.ts'
import { refinementNameOf } from '../src/refinements.ts'

/** JSON Schema keywords `json-shape.ts` implements; anything else fails generation. */
const KNOWN = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'propertyNames',
  'items',
  'prefixItems',
  'enum',
  'const',
  'anyOf',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'pattern',
  'x-coerce',
  'x-refine',
])

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** What zod's checks look like inside (`_zod.def`), as far as the generator reads them. */
interface CheckInternals {
  _zod: { def: { check?: string; fn?: unknown } }
}
interface SchemaInternals {
  _zod: { def: { type?: string; coerce?: boolean; checks?: CheckInternals[] } }
}

/**
 * Writes zod's coercion and named refinements into the JSON Schema of one zod schema (the
 * `override` hook of `z.toJSONSchema`).
 */
function annotate(ctx: {
  zodSchema: unknown
  jsonSchema: Record<string, unknown>
  path: (string | number)[]
}) {
  const def = (ctx.zodSchema as SchemaInternals)._zod.def
  // These change the parsed value, which JSON Schema of the input cannot say.
  if (
    def.type === 'pipe' ||
    def.type === 'transform' ||
    def.type === 'default' ||
    def.type === 'prefault' ||
    def.type === 'catch'
  )
    throw new Error(`${ctx.path.join('.') || '(schema)'}: a ${def.type} cannot be checked without zod`)
  if (def.coerce) {
    if (def.type !== 'number') throw new Error(`${ctx.path.join('.')}: only z.coerce.number() is supported`)
    ctx.jsonSchema['x-coerce'] = 'number'
  }
  const names: string[] = []
  for (const check of def.checks ?? []) {
    if (check._zod.def.check !== 'custom') continue
    const name = refinementNameOf(check._zod.def.fn)
    if (name === undefined)
      throw new Error(
        `${ctx.path.join('.') || '(schema)'}: a refinement that is not in REFINEMENTS (refinements.ts) cannot be checked without zod`,
      )
    names.push(name)
  }
  if (names.length > 0) ctx.jsonSchema['x-refine'] = names
}

/** The schema as zod parses input, with coercions and refinements annotated. */
function toJson(schema: z.ZodType): Json {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'throw', override: annotate }) as Json
}

/**
 * Drops what the checker does not need: `$schema`, `additionalProperties: false`,
 * string-typed property names, `format: starts_with` (its `pattern` says the same) and the
 * safe-integer bounds an integer implies.
 */
function compact(schema: Json, path: string): Json {
  if (Array.isArray(schema)) return schema.map((s, i) => compact(s, `${path}[${i}]`))
  if (schema === null || typeof schema !== 'object') return schema
  const out: { [key: string]: Json } = {}
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$schema') continue
    if (key === 'additionalProperties' && value === false) continue
    if (key === 'propertyNames' && JSON.stringify(value) === '{"type":"string"}') continue
    if (key === 'format' && value === 'starts_with' && typeof schema.pattern === 'string') continue
    if (schema.type === 'integer' && key === 'maximum' && value === Number.MAX_SAFE_INTEGER) continue
    if (schema.type === 'integer' && key === 'minimum' && value === Number.MIN_SAFE_INTEGER) continue
    if (key === 'items' && value === false && Array.isArray(schema.prefixItems)) {
      out[key] = false
      continue
    }
    if (!KNOWN.has(key))
      throw new Error(`${path}: JSON Schema keyword "${key}" is not implemented by json-shape.ts`)
    if (key === 'properties' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, compact(v, `${path}.${k}`)]))
    } else out[key] = compact(value, `${path}.${key}`)
  }
  return out
}

/** The checker's JSON Schema of one zod schema; throws on what the checker cannot enforce. */
export function schemaOf(schema: z.ZodType): Json {
  return compact(toJson(schema), '(schema)')
}

/** Object schemas of a discriminated union, keyed by their `type` constant. */
function byType(schema: z.ZodType, path: string): { [type: string]: Json } {
  const union = toJson(schema)
  if (union === null || typeof union !== 'object' || Array.isArray(union) || !Array.isArray(union.oneOf))
    throw new Error(`${path} is not a oneOf`)
  const out: { [type: string]: Json } = {}
  for (const branch of union.oneOf) {
    const type = (branch as { properties?: { type?: { const?: unknown } } }).properties?.type?.const
    if (typeof type !== 'string') throw new Error(`${path}: a branch has no constant "type"`)
    out[type] = compact(branch, `${path}.${type}`)
  }
  return out
}

/** The tables of both generated modules. */
export interface ZodFreeSchemas {
  /** `HostFrame` by `type`. */
  hostFrames: { [type: string]: Json }
  /** Each agent method's params. */
  params: { [method: string]: Json }
  /** The agent's command line. */
  agentArgs: Json
  /** Each error code's details. */
  details: { [code: string]: Json }
}

/** Builds the tables from the protocol's zod schemas. */
export function zodFreeSchemas(): ZodFreeSchemas {
  const params: { [method: string]: Json } = {}
  for (const [method, schema] of Object.entries(AGENT_METHODS))
    params[method] = compact(toJson(schema.params), `${method}.params`)
  const details: { [code: string]: Json } = {}
  for (const [code, schema] of Object.entries(ERROR_DETAILS))
    details[code] = compact(toJson(schema), `details.${code}`)
  return {
    hostFrames: byType(HostFrame, 'HostFrame'),
    params,
    agentArgs: compact(toJson(AgentArgs), 'AgentArgs'),
    details,
  }
}

const HEADER =
  "// Generated by scripts/generate-zod-free-schemas.ts from the protocol's zod schemas; do not edit."

/** Compact JSON in a string: smaller in a bundle than an object literal, and parsed once. */
const jsonConst = (value: Json): string => `JSON.parse(${JSON.stringify(JSON.stringify(value))})`

/** The text of agent-inbound-schemas.ts (before formatting). */
function agentInboundModule(schemas: ZodFreeSchemas): string {
  return [
    HEADER,
    '// What the agent parses, as JSON Schema checked by json-shape.ts (see agent-inbound.ts).',
    "import type { JsonSchema } from './json-shape.ts'",
    '',
    '/** Runner→agent frames (`HostFrame`) by `type`. */',
    `export const HOST_FRAME_SCHEMAS: { readonly [type: string]: JsonSchema } = ${jsonConst(schemas.hostFrames)}`,
    '',
    "/** Each agent method's params (`AGENT_METHODS[method].params`). */",
    `export const AGENT_PARAM_SCHEMAS: { readonly [method: string]: JsonSchema } = ${jsonConst(schemas.params)}`,
    '',
    "/** The agent's command line (`AgentArgs`). */",
    `export const AGENT_ARGS_SCHEMA: JsonSchema = ${jsonConst(schemas.agentArgs)}`,
    '',
  ].join('\n')
}

/** The text of error-details-schemas.ts (before formatting). */
function errorDetailsModule(schemas: ZodFreeSchemas): string {
  return [
    HEADER,
    "// Each error code's `details` (`ERROR_DETAILS`), as JSON Schema checked by json-shape.ts.",
    "import type { JsonSchema } from './json-shape.ts'",
    '',
    '/** The `details` schema of each error code. */',
    `export const ERROR_DETAILS_SCHEMAS: { readonly [code: string]: JsonSchema } = ${jsonConst(schemas.details)}`,
    '',
  ].join('\n')
}

/** The generated files, by path, with their text. */
export function zodFreeModules(): { agentInbound: string; errorDetails: string } {
  const schemas = zodFreeSchemas()
  return { agentInbound: agentInboundModule(schemas), errorDetails: errorDetailsModule(schemas) }
}

const SRC = join(import.meta.dirname, '..', 'src')

if (process.argv[1] === import.meta.filename) {
  const modules = zodFreeModules()
  const files = [join(SRC, 'agent-inbound-schemas.ts'), join(SRC, 'error-details-schemas.ts')]
  writeFileSync(files[0]!, modules.agentInbound)
  writeFileSync(files[1]!, modules.errorDetails)
  execFileSync('pnpm', ['exec', 'biome', 'format', '--write', ...files], { stdio: 'inherit' })
}
