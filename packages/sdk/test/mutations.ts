// Variants of a valid JSON value with one field removed or replaced by a value of another
// kind, used to check that the SDK's shapes accept and reject exactly what the protocol's zod
// schemas do.

const REPLACEMENTS: unknown[] = [
  null,
  'text',
  '',
  'x'.repeat(129),
  0,
  -1,
  1.5,
  2 ** 53,
  Number.NaN,
  true,
  [],
  {},
  ['a'],
  { a: 1 },
]

/** One variant: the dotted path changed and the whole value after the change. */
export interface Mutation {
  path: string
  value: unknown
}

/** Every single-field variant of `value`, recursing into objects and arrays. */
export function mutations(value: unknown, path = ''): Mutation[] {
  const out: Mutation[] = []
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      for (const m of mutations(item, `${path}.${i}`)) {
        const copy = [...value]
        copy[i] = m.value
        out.push({ path: m.path, value: copy })
      }
    })
    return out
  }
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>
    for (const key of Object.keys(record)) {
      const at = path ? `${path}.${key}` : key
      const { [key]: _removed, ...without } = record
      out.push({ path: at, value: without })
      for (const m of mutations(record[key], at))
        out.push({ path: m.path, value: { ...record, [key]: m.value } })
    }
    return out
  }
  for (const r of REPLACEMENTS) out.push({ path, value: r })
  return out
}
