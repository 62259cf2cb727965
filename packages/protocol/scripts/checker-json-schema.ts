// Build-time helpers shared by the generators that turn zod schemas into the JSON Schema that
// json-shape.ts checks: the protocol's zod-free modules (scripts/generate-zod-free-schemas.ts)
// and the SDK's wire schemas (packages/sdk/scripts/generate-wire-schemas.ts). Each generator
// makes JSON Schema with `z.toJSONSchema` its own way (input or output, annotations), then
// compacts it here. Exported as `@conch/protocol/checker-json-schema`, which no run-time entry
// imports, so it never reaches a bundle.

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** The JSON Schema keywords json-shape.ts implements, with its two extensions (`x-`). */
const JSON_SHAPE_KEYWORDS: ReadonlySet<string> = new Set([
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

/**
 * Drops what the checker does not need: `$schema`, `additionalProperties: false` (unknown keys
 * are dropped, as zod does), string-typed property names, `format: starts_with` (its `pattern`
 * says the same) and the safe-integer bounds an integer implies. Throws on any keyword that
 * json-shape.ts does not implement, so no rule of a schema is silently dropped.
 */
export function compactSchema(schema: Json, path: string): Json {
  if (Array.isArray(schema)) return schema.map((s, i) => compactSchema(s, `${path}[${i}]`))
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
    if (!JSON_SHAPE_KEYWORDS.has(key))
      throw new Error(`${path}: JSON Schema keyword "${key}" is not implemented by json-shape.ts`)
    if (key === 'properties' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      out[key] = Object.fromEntries(
        Object.entries(value).map(([k, v]) => [k, compactSchema(v, `${path}.${k}`)]),
      )
    } else out[key] = compactSchema(value, `${path}.${key}`)
  }
  return out
}

/** The compacted object schemas of a discriminated union's JSON Schema, keyed by their `type` constant. */
export function compactSchemasByType(union: Json, path: string): { [type: string]: Json } {
  if (union === null || typeof union !== 'object' || Array.isArray(union) || !Array.isArray(union.oneOf))
    throw new Error(`${path} is not a oneOf`)
  const out: { [type: string]: Json } = {}
  for (const branch of union.oneOf) {
    const type = (branch as { properties?: { type?: { const?: unknown } } }).properties?.type?.const
    if (typeof type !== 'string') throw new Error(`${path}: a branch has no constant "type"`)
    out[type] = compactSchema(branch, `${path}.${type}`)
  }
  return out
}
