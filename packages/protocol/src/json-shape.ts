// Checking untrusted JSON against the protocol's schemas without zod, for the processes that
// do not ship it (the SDK, the agent). The schemas are generated at build time from the
// protocol's zod schemas into JSON Schema (the SDK's wire-schemas.ts, the protocol's
// agent-inbound-schemas.ts); `shapeOf` turns one into a validator that returns a fresh value
// (unknown keys are dropped, as zod drops them; a `__proto__` key is never copied, as zod never
// copies it) or throws `ShapeError` naming the path. It implements the JSON Schema subset that
// zod emits for these schemas, plus two extensions for what JSON Schema cannot say: `x-coerce`
// (zod's `z.coerce.number()`) and `x-refine` (a named refinement from `refinements.ts`). The
// generators fail on any other keyword, so nothing a schema says is silently left unchecked.
// This module imports nothing but the refinements, so it is zod-free.
import { REFINEMENTS, type RefinementName } from './refinements.ts'

/** Thrown by a shape when a value does not match; `path` names the field. */
export class ShapeError extends Error {
  /** Dotted path of the offending field. */
  readonly path: string

  /** `expected` says what the field must be; with `isMessage`, it is the whole complaint. */
  constructor(path: string, expected: string, isMessage = false) {
    super(`${path || '(value)'}: ${isMessage ? expected : `expected ${expected}`}`)
    this.name = 'ShapeError'
    this.path = path
  }
}

/** A validator: returns the typed value or throws `ShapeError`. */
export type Shape<T> = (value: unknown, path: string) => T

/** The JSON Schema subset of the generated wire schemas. */
export interface JsonSchema {
  /** One JSON type or several. */
  readonly type?: string | readonly string[]
  /** Known object fields. */
  readonly properties?: { readonly [key: string]: JsonSchema }
  /** Fields that must be present. */
  readonly required?: readonly string[]
  /** The schema of every other field (a record), or `false`/absent: other fields are dropped. */
  readonly additionalProperties?: JsonSchema | boolean
  /** The schema of every array item; `false` after `prefixItems`: no items beyond them. */
  readonly items?: JsonSchema | false
  /** The schemas of a tuple's items, by position. */
  readonly prefixItems?: readonly JsonSchema[]
  /** The schema every key of a record matches. */
  readonly propertyNames?: JsonSchema
  /** Allowed values. */
  readonly enum?: readonly unknown[]
  /** The one allowed value. */
  readonly const?: unknown
  /** Alternatives; the first that matches wins. */
  readonly anyOf?: readonly JsonSchema[]
  /** Bounds of a number. */
  readonly minimum?: number
  /** Bounds of a number. */
  readonly maximum?: number
  /** Bounds of a number. */
  readonly exclusiveMinimum?: number
  /** Bounds of a string's UTF-16 length (as zod counts). */
  readonly minLength?: number
  /** Bounds of a string's UTF-16 length. */
  readonly maxLength?: number
  /** The most items an array may hold. */
  readonly maxItems?: number
  /** The fewest items an array may hold. */
  readonly minItems?: number
  /** A regular expression a string matches. */
  readonly pattern?: string
  /** `number`: the value is converted with `Number()` first, as `z.coerce.number()` does. */
  readonly 'x-coerce'?: 'number'
  /** Refinements (by name in `REFINEMENTS`) the value must pass once every other check has. */
  readonly 'x-refine'?: readonly RefinementName[]
}

/** `path` and `key` as a dotted path. */
const join = (path: string, key: string): string => (path ? `${path}.${key}` : key)

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

const patterns = new Map<string, RegExp>()

function regex(source: string): RegExp {
  let re = patterns.get(source)
  if (!re) {
    re = new RegExp(source)
    patterns.set(source, re)
  }
  return re
}

function isType(type: string, v: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof v === 'string'
    case 'integer':
      return Number.isSafeInteger(v)
    case 'number':
      return typeof v === 'number' && Number.isFinite(v)
    case 'boolean':
      return typeof v === 'boolean'
    case 'null':
      return v === null
    case 'array':
      return Array.isArray(v)
    case 'object':
      return isRecord(v)
    default:
      return false
  }
}

const article = (type: string): string => (/^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`)

function within(s: JsonSchema, n: number): boolean {
  return (
    (s.minimum === undefined || n >= s.minimum) &&
    (s.maximum === undefined || n <= s.maximum) &&
    (s.exclusiveMinimum === undefined || n > s.exclusiveMinimum)
  )
}

function range(s: JsonSchema): string {
  const low = s.minimum !== undefined ? `>= ${s.minimum}` : `> ${s.exclusiveMinimum}`
  return s.maximum === undefined ? low : `${low} and <= ${s.maximum}`
}

/** Checks `v` against `s` and returns the value with unknown object keys dropped. */
function checkValue(s: JsonSchema, v: unknown, path: string): unknown {
  const value = checkForm(s, s['x-coerce'] === 'number' ? Number(v) : v, path)
  const refine = s['x-refine']
  if (refine) {
    for (const name of refine) {
      const refinement = REFINEMENTS[name] as { test: (v: unknown) => boolean; message: string } | undefined
      if (!refinement) throw new Error(`unknown refinement "${name}": regenerate the schemas`)
      if (!refinement.test(value)) throw new ShapeError(path, refinement.message, true)
    }
  }
  return value
}

/** Checks `v` against every keyword of `s` but `x-coerce` and `x-refine`. */
function checkForm(s: JsonSchema, v: unknown, path: string): unknown {
  if (s.anyOf) {
    for (const branch of s.anyOf) {
      try {
        return checkValue(branch, v, path)
      } catch (err) {
        if (!(err instanceof ShapeError)) throw err
      }
    }
    throw new ShapeError(path, 'one of the allowed forms')
  }
  if (s.const !== undefined && v !== s.const) throw new ShapeError(path, JSON.stringify(s.const))
  if (s.enum && !s.enum.includes(v)) throw new ShapeError(path, s.enum.join(' | '))
  const types = s.type === undefined ? [] : typeof s.type === 'string' ? [s.type] : s.type
  if (types.length > 0 && !types.some((t) => isType(t, v)))
    throw new ShapeError(path, types.map(article).join(' or '))
  if (typeof v === 'string') {
    if (
      (s.minLength !== undefined && v.length < s.minLength) ||
      (s.maxLength !== undefined && v.length > s.maxLength) ||
      (s.pattern !== undefined && !regex(s.pattern).test(v))
    )
      throw new ShapeError(path, 'a string of the allowed form')
    return v
  }
  if (typeof v === 'number') {
    if (!within(s, v))
      throw new ShapeError(path, `${types.includes('integer') ? 'an integer' : 'a number'} ${range(s)}`)
    return v
  }
  if (Array.isArray(v)) {
    if (s.maxItems !== undefined && v.length > s.maxItems)
      throw new ShapeError(path, `at most ${s.maxItems} items`)
    if (s.minItems !== undefined && v.length < s.minItems)
      throw new ShapeError(path, `at least ${s.minItems} items`)
    const { items, prefixItems } = s
    if (prefixItems) {
      if (items === false && v.length > prefixItems.length)
        throw new ShapeError(path, `at most ${prefixItems.length} items`)
      return v.map((item: unknown, i) => {
        const schema = prefixItems[i] ?? (items === false ? undefined : items)
        return schema ? checkValue(schema, item, join(path, String(i))) : item
      })
    }
    return items ? v.map((item: unknown, i) => checkValue(items, item, join(path, String(i)))) : v
  }
  if (isRecord(v) && (s.properties || typeof s.additionalProperties === 'object'))
    return checkObject(s, v, path)
  return v
}

function checkObject(s: JsonSchema, v: Record<string, unknown>, path: string): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const known = s.properties ?? {}
  for (const [key, field] of Object.entries(known)) {
    const at = join(path, key)
    const present = Object.hasOwn(v, key)
    const item = present ? v[key] : undefined
    if (item === undefined) {
      // As zod: a missing required key fails; a present `undefined` (never from JSON) passes
      // only a schema that accepts anything, and an optional key may be absent or undefined.
      if (!s.required?.includes(key)) continue
      if (!present || Object.keys(field).length > 0) throw new ShapeError(at, 'a value')
    }
    out[key] = checkValue(field, item, at)
  }
  const rest = s.additionalProperties
  if (typeof rest === 'object') {
    const names = s.propertyNames
    for (const [key, item] of Object.entries(v)) {
      // Assigning `__proto__` to a plain object would replace its prototype: zod skips the key.
      if (Object.hasOwn(known, key) || key === '__proto__') continue
      const at = join(path, key)
      if (names) checkValue(names, key, at)
      out[key] = checkValue(rest, item, at)
    }
  }
  return out
}

/**
 * The validator of a generated schema. `T` is the protocol's type for that schema (the
 * SDK's mirror types are held equal to it by a type test), which the schema was generated from.
 */
export function shapeOf<T>(schema: JsonSchema): Shape<T> {
  return (value, path) => checkValue(schema, value, path) as T
}

/** Runs a shape and returns its value, or `undefined` when it does not match. */
export function check<T>(shape: Shape<T>, value: unknown): T | undefined {
  try {
    return shape(value, '')
  } catch (err) {
    if (err instanceof ShapeError) return undefined
    throw err
  }
}
