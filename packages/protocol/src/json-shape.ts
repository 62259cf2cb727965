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

/** Whether `v` is of one of `types` (a loop: a closure per check would be garbage per field). */
function hasType(types: readonly string[], v: unknown): boolean {
  for (const type of types) if (isType(type, v)) return true
  return false
}

const article = (type: string): string => (/^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`)

/**
 * A schema made ready for checking, once per schema: every keyword in one object shape, so the
 * checks read the same fields of the same shape at every node (JSON-parsed schemas have as
 * many shapes as keyword sets, which makes each read a slow lookup).
 */
interface Compiled {
  /** The allowed JSON types (empty: any). */
  types: readonly string[]
  /** Alternatives, or null. */
  anyOf: readonly Compiled[] | null
  /** Whether `constValue` applies. */
  hasConst: boolean
  /** The one allowed value. */
  constValue: unknown
  /** Allowed values, or null. */
  enumValues: readonly unknown[] | null
  /** String bounds and form (`-1`/`Infinity`: none). */
  minLength: number
  maxLength: number
  pattern: RegExp | null
  /** Number bounds. */
  minimum: number
  maximum: number
  exclusiveMinimum: number
  /** Array bounds and items. */
  minItems: number
  maxItems: number
  items: Compiled | null
  /** No items beyond `prefixItems`. */
  closedTuple: boolean
  prefixItems: readonly Compiled[] | null
  /** Whether objects are checked field by field (known fields or a record). */
  isObject: boolean
  /** The fields, in order. */
  properties: readonly (readonly [string, Compiled])[]
  /** Field names, for telling known keys from others. */
  known: ReadonlySet<string>
  /** The required fields. */
  required: ReadonlySet<string>
  /** Whether a field of this schema accepts anything (even a present `undefined`). */
  acceptsAnything: boolean
  /** The schema of other fields (a record), or null: they are dropped. */
  rest: Compiled | null
  /** The schema of a record's keys, or null. */
  propertyNames: Compiled | null
  /** `Number()` first. */
  coerce: boolean
  /** Refinements, looked up. */
  refinements: readonly { test: (v: unknown) => boolean; message: string }[]
  /** The source schema, for messages. */
  source: JsonSchema
}

/** Compiles `s` and every schema inside it. */
function compile(s: JsonSchema): Compiled {
  const items = s.items
  const rest = s.additionalProperties
  return {
    types: s.type === undefined ? [] : typeof s.type === 'string' ? [s.type] : s.type,
    anyOf: s.anyOf ? s.anyOf.map(compile) : null,
    hasConst: s.const !== undefined,
    constValue: s.const,
    enumValues: s.enum ?? null,
    minLength: s.minLength ?? -1,
    maxLength: s.maxLength ?? Number.POSITIVE_INFINITY,
    pattern: s.pattern === undefined ? null : new RegExp(s.pattern),
    minimum: s.minimum ?? Number.NEGATIVE_INFINITY,
    maximum: s.maximum ?? Number.POSITIVE_INFINITY,
    exclusiveMinimum: s.exclusiveMinimum ?? Number.NEGATIVE_INFINITY,
    minItems: s.minItems ?? -1,
    maxItems: s.maxItems ?? Number.POSITIVE_INFINITY,
    items: items === undefined || items === false ? null : compile(items),
    closedTuple: items === false,
    prefixItems: s.prefixItems ? s.prefixItems.map(compile) : null,
    isObject: s.properties !== undefined || typeof rest === 'object',
    properties: Object.entries(s.properties ?? {}).map(([key, field]) => [key, compile(field)] as const),
    known: new Set(Object.keys(s.properties ?? {})),
    required: new Set(s.required ?? []),
    acceptsAnything: Object.keys(s).length === 0,
    rest: typeof rest === 'object' ? compile(rest) : null,
    propertyNames: s.propertyNames ? compile(s.propertyNames) : null,
    coerce: s['x-coerce'] === 'number',
    refinements: (s['x-refine'] ?? []).map((name) => {
      const refinement = REFINEMENTS[name] as { test: (v: unknown) => boolean; message: string } | undefined
      if (!refinement) throw new Error(`unknown refinement "${name}": regenerate the schemas`)
      return refinement
    }),
    source: s,
  }
}

function range(s: JsonSchema): string {
  const low = s.minimum !== undefined ? `>= ${s.minimum}` : `> ${s.exclusiveMinimum}`
  return s.maximum === undefined ? low : `${low} and <= ${s.maximum}`
}

/** Checks `v` against `c` and returns the value with unknown object keys dropped. */
function checkValue(c: Compiled, v: unknown, path: string): unknown {
  const value = checkForm(c, c.coerce ? Number(v) : v, path)
  for (const refinement of c.refinements) {
    if (!refinement.test(value)) throw new ShapeError(path, refinement.message, true)
  }
  return value
}

/** Checks `v` against every keyword of `c` but coercion and refinements. */
function checkForm(c: Compiled, v: unknown, path: string): unknown {
  if (c.anyOf !== null) {
    for (const branch of c.anyOf) {
      try {
        return checkValue(branch, v, path)
      } catch (err) {
        if (!(err instanceof ShapeError)) throw err
      }
    }
    throw new ShapeError(path, 'one of the allowed forms')
  }
  if (c.hasConst && v !== c.constValue) throw new ShapeError(path, JSON.stringify(c.constValue))
  if (c.enumValues !== null && !c.enumValues.includes(v)) throw new ShapeError(path, c.enumValues.join(' | '))
  const types = c.types
  if (types.length > 0 && !hasType(types, v)) throw new ShapeError(path, types.map(article).join(' or '))
  if (typeof v === 'string') {
    if (v.length < c.minLength || v.length > c.maxLength || (c.pattern !== null && !c.pattern.test(v)))
      throw new ShapeError(path, 'a string of the allowed form')
    return v
  }
  if (typeof v === 'number') {
    if (v < c.minimum || v > c.maximum || v <= c.exclusiveMinimum)
      throw new ShapeError(
        path,
        `${types.includes('integer') ? 'an integer' : 'a number'} ${range(c.source)}`,
      )
    return v
  }
  if (Array.isArray(v)) {
    if (v.length > c.maxItems) throw new ShapeError(path, `at most ${c.maxItems} items`)
    if (v.length < c.minItems) throw new ShapeError(path, `at least ${c.minItems} items`)
    const { items, prefixItems } = c
    if (prefixItems !== null) {
      if (c.closedTuple && v.length > prefixItems.length)
        throw new ShapeError(path, `at most ${prefixItems.length} items`)
      return v.map((item: unknown, i) => {
        const schema = prefixItems[i] ?? items
        return schema ? checkValue(schema, item, join(path, String(i))) : item
      })
    }
    return items ? v.map((item: unknown, i) => checkValue(items, item, join(path, String(i)))) : v
  }
  if (c.isObject && isRecord(v)) return checkObject(c, v, path)
  return v
}

function checkObject(c: Compiled, v: Record<string, unknown>, path: string): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, field] of c.properties) {
    const present = Object.hasOwn(v, key)
    const item = present ? v[key] : undefined
    if (item === undefined) {
      // As zod: a missing required key fails; a present `undefined` (never from JSON) passes
      // only a schema that accepts anything, and an optional key may be absent or undefined.
      if (!c.required.has(key)) continue
      if (!present || !field.acceptsAnything) throw new ShapeError(join(path, key), 'a value')
    }
    out[key] = checkValue(field, item, join(path, key))
  }
  const rest = c.rest
  if (rest !== null) {
    const names = c.propertyNames
    for (const [key, item] of Object.entries(v)) {
      // Assigning `__proto__` to a plain object would replace its prototype: zod skips the key.
      if (c.known.has(key) || key === '__proto__') continue
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
  // Compiled on first use: a process holds checkers of many schemas and uses few of them.
  let compiled: Compiled | undefined
  return (value, path) => {
    compiled ??= compile(schema)
    return checkValue(compiled, value, path) as T
  }
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
