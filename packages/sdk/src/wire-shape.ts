// Wire shapes: a few dozen lines of validators that check untrusted JSON exactly like the
// protocol's zod schemas do, without shipping zod. Each shape is a function that returns a
// fresh, typed value (unknown keys are dropped, as zod drops them) or throws `ShapeError`
// naming the path. Tests compare every shape against the protocol schema it mirrors.

/** Thrown by a shape when a value does not match; `path` names the field. */
export class ShapeError extends Error {
  /** Dotted path of the offending field. */
  readonly path: string

  constructor(path: string, expected: string) {
    super(`${path || '(value)'}: expected ${expected}`)
    this.name = 'ShapeError'
    this.path = path
  }
}

/** A validator: returns the typed value or throws `ShapeError`. */
export type Shape<T> = (value: unknown, path: string) => T

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** Any string, optionally bounded in UTF-16 length or by a pattern. */
export function str(opts?: { min?: number; max?: number; pattern?: RegExp }): Shape<string> {
  const min = opts?.min ?? 0
  const max = opts?.max ?? Number.POSITIVE_INFINITY
  const pattern = opts?.pattern
  return (v, path) => {
    if (typeof v !== 'string' || v.length < min || v.length > max || (pattern && !pattern.test(v))) {
      throw new ShapeError(path, 'a string')
    }
    return v
  }
}

/** A finite number, optionally a safe integer and bounded. */
export function num(opts?: { int?: boolean; min?: number; max?: number }): Shape<number> {
  const int = opts?.int ?? false
  const min = opts?.min ?? Number.NEGATIVE_INFINITY
  const max = opts?.max ?? Number.POSITIVE_INFINITY
  return (v, path) => {
    if (
      typeof v !== 'number' ||
      !Number.isFinite(v) ||
      (int && !Number.isSafeInteger(v)) ||
      v < min ||
      v > max
    ) {
      throw new ShapeError(path, int ? 'an integer' : 'a number')
    }
    return v
  }
}

/** A boolean. */
export const bool: Shape<boolean> = (v, path) => {
  if (typeof v !== 'boolean') throw new ShapeError(path, 'a boolean')
  return v
}

/** Exactly `value`. */
export function literal<const T extends string | boolean>(value: T): Shape<T> {
  return (v, path) => {
    if (v !== value) throw new ShapeError(path, JSON.stringify(value))
    return value
  }
}

/** One of `values`. */
export function oneOf<const T extends string>(values: readonly T[]): Shape<T> {
  const set: ReadonlySet<unknown> = new Set(values)
  return (v, path) => {
    if (!set.has(v)) throw new ShapeError(path, values.join(' | '))
    return v as T
  }
}

/** `null` or the inner shape. */
export function nullable<T>(inner: Shape<T>): Shape<T | null> {
  return (v, path) => (v === null ? null : inner(v, path))
}

/** An array of the inner shape. */
export function arr<T>(inner: Shape<T>): Shape<T[]> {
  return (v, path) => {
    if (!Array.isArray(v)) throw new ShapeError(path, 'an array')
    return v.map((item: unknown, i) => inner(item, `${path}.${i}`))
  }
}

/** A string-keyed record of the inner shape. */
export function record<T>(inner: Shape<T>): Shape<Record<string, T>> {
  return (v, path) => {
    if (!isRecord(v)) throw new ShapeError(path, 'an object')
    const out: Record<string, T> = {}
    for (const [k, item] of Object.entries(v)) out[k] = inner(item, `${path}.${k}`)
    return out
  }
}

/** Any JSON value, kept as `unknown`. */
export const unknownValue: Shape<unknown> = (v) => v

/** Marks a field of `obj` as optional: absent or `undefined` is allowed. */
export interface Optional<T> {
  /** The shape of the value when present. */
  readonly optional: Shape<T>
}

/** Wraps a shape for an optional object field. */
export function opt<T>(inner: Shape<T>): Optional<T> {
  return { optional: inner }
}

type Field = Shape<unknown> | Optional<unknown>
type Fields = Record<string, Field>
type RequiredKeys<F extends Fields> = { [K in keyof F]: F[K] extends Shape<unknown> ? K : never }[keyof F]
type OptionalKeys<F extends Fields> = Exclude<keyof F, RequiredKeys<F>>
type Out<F extends Fields> = {
  [K in RequiredKeys<F>]: F[K] extends Shape<infer T> ? T : never
} & { [K in OptionalKeys<F>]?: F[K] extends Optional<infer T> ? T : never }
type Flat<T> = { [K in keyof T]: T[K] } & {}

/** An object with the given fields; unknown keys are dropped. */
export function obj<F extends Fields>(fields: F): Shape<Flat<Out<F>>> {
  const entries = Object.entries(fields).map(([key, f]) =>
    typeof f === 'function' ? { key, shape: f, optional: false } : { key, shape: f.optional, optional: true },
  )
  return (v, path) => {
    if (!isRecord(v)) throw new ShapeError(path, 'an object')
    const out: Record<string, unknown> = {}
    for (const { key, shape, optional } of entries) {
      const item = v[key]
      if (item === undefined) {
        if (optional) continue
        throw new ShapeError(path ? `${path}.${key}` : key, 'a value')
      }
      out[key] = shape(item, path ? `${path}.${key}` : key)
    }
    return out as Flat<Out<F>>
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
