// Turns a JSON Schema object (as zod emits it) into markdown table rows, one per field, nested
// objects flattened into dotted paths. Field descriptions come from the protocol's TSDoc,
// joined by schema name (see protocol-docs.ts).
import type { SchemaDoc } from './protocol-docs.ts'

/** A JSON Schema node, as far as these pages read it. */
export interface JsonSchema {
  type?: string | string[]
  const?: unknown
  enum?: unknown[]
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  items?: JsonSchema
  properties?: Record<string, JsonSchema>
  required?: string[]
  additionalProperties?: JsonSchema | boolean
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
  minLength?: number
  maxLength?: number
  pattern?: string
  format?: string
  default?: unknown
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER

/** Escapes text for a markdown table cell. */
export function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ')
}

function constraints(s: JsonSchema): string[] {
  const out: string[] = []
  if (s.exclusiveMinimum !== undefined) out.push(`> ${s.exclusiveMinimum}`)
  if (s.minimum !== undefined && s.maximum !== undefined && s.maximum !== MAX_SAFE) {
    out.push(`${s.minimum}–${s.maximum}`)
  } else {
    if (s.minimum !== undefined) out.push(`≥ ${s.minimum}`)
    if (s.maximum !== undefined && s.maximum !== MAX_SAFE) out.push(`≤ ${s.maximum}`)
  }
  if (s.minLength !== undefined && s.minLength > 0) out.push(`length ≥ ${s.minLength}`)
  if (s.maxLength !== undefined) out.push(`length ≤ ${s.maxLength}`)
  return out
}

/** A short TypeScript-like rendering of a schema's type. */
export function typeOf(s: JsonSchema): string {
  if (s.const !== undefined) return JSON.stringify(s.const)
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ')
  const union = s.anyOf ?? s.oneOf
  if (union) return union.map(typeOf).join(' | ')
  if (Array.isArray(s.type)) return s.type.map((t) => typeOf({ ...s, type: t })).join(' | ')
  switch (s.type) {
    case 'array': {
      const inner = s.items ? typeOf(s.items) : 'unknown'
      return inner.includes(' ') ? `(${inner})[]` : `${inner}[]`
    }
    case 'object':
      if (s.properties) return 'object'
      if (s.additionalProperties && typeof s.additionalProperties === 'object') {
        return `Record<string, ${typeOf(s.additionalProperties) || 'unknown'}>`
      }
      return 'object'
    case undefined:
      return 'unknown'
    default:
      return s.type
  }
}

/** One row of a field table. */
export interface FieldRow {
  path: string
  type: string
  required: boolean
  notes: string
}

/** The object schema inside `s`, looking through `T | null` and arrays. */
function objectIn(s: JsonSchema): { schema: JsonSchema; suffix: string } | null {
  if (s.type === 'object' && s.properties) return { schema: s, suffix: '' }
  if (s.type === 'array' && s.items) {
    const inner = objectIn(s.items)
    return inner ? { schema: inner.schema, suffix: `[]${inner.suffix}` } : null
  }
  for (const option of s.anyOf ?? []) {
    const inner = objectIn(option)
    if (inner) return inner
  }
  return null
}

/** Flattens an object schema into rows; `name` picks the TSDoc of its fields. */
export function fieldRows(
  schema: JsonSchema,
  name: string | null,
  docs: Map<string, SchemaDoc>,
  prefix = '',
  depth = 0,
): FieldRow[] {
  const rows: FieldRow[] = []
  const own = name ? docs.get(name) : undefined
  const required = new Set(schema.required ?? [])
  for (const [field, property] of Object.entries(schema.properties ?? {})) {
    const fieldDoc = own?.fields.get(field)
    const extra = constraints(property)
    const notes = [fieldDoc?.doc ?? '', extra.length ? `(${extra.join(', ')})` : ''].filter(Boolean).join(' ')
    const path = `${prefix}${field}`
    rows.push({ path, type: typeOf(property), required: required.has(field), notes })
    const nested = objectIn(property)
    if (nested && depth < 3) {
      const ref = fieldDoc?.ref && docs.get(fieldDoc.ref)?.fields.size ? fieldDoc.ref : null
      rows.push(...fieldRows(nested.schema, ref, docs, `${path}${nested.suffix}.`, depth + 1))
    }
  }
  return rows
}

/** A markdown table of the rows. */
export function fieldTable(rows: FieldRow[]): string {
  if (rows.length === 0) return ''
  const lines = ['| Field | Type | Required | Description |', '| --- | --- | --- | --- |']
  for (const row of rows) {
    lines.push(
      `| \`${cell(row.path)}\` | \`${cell(row.type)}\` | ${row.required ? 'yes' : 'no'} | ${cell(row.notes)} |`,
    )
  }
  return `${lines.join('\n')}\n`
}
