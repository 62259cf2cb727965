import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import * as protocol from './index.ts'

// Every schema the protocol exports has a type of the same name (`export const X = z…;
// export type X = z.infer<typeof X>`), so a consumer writes `X` for both; SCREAMING_CASE
// constants that alias a schema (`API_ERROR_BODY`) are not schemas of their own. The check reads the
// sources for the type declaration, because TypeScript erases types before a test runs.

const srcDir = import.meta.dirname
const declared = new Set(
  readdirSync(srcDir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .flatMap((f) =>
      [...readFileSync(join(srcDir, f), 'utf8').matchAll(/^export (?:type|interface) (\w+)/gm)].map(
        (m) => m[1],
      ),
    ),
)

describe('schema types', () => {
  it('declares a same-name type for every exported schema', () => {
    const schemas = Object.entries(protocol)
      .filter(([, value]) => value instanceof z.ZodType)
      .map(([name]) => name)
      .filter((name) => !/^[A-Z0-9_]+$/.test(name))
    expect(schemas.length).toBeGreaterThan(50)
    expect(schemas.filter((name) => !declared.has(name))).toEqual([])
  })
})
