// Attack: an agent answers a streamed run's `session.run` call with something other than `{}`.
// The runner checks that answer with a hand-written object check (shell-run-requests.ts,
// `STREAMED_RUN`) instead of `z.object({})`, whose stripped copy it would drop anyway; the check
// must accept exactly what `z.object({})` accepts, so a hostile answer fails the run as before.
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { STREAMED_RUN } from '../../src/shell-run-requests.ts'

class Foreign {
  x = 1
}

const ANSWERS: unknown[] = [
  {},
  { queued: true },
  { __proto__: null },
  Object.create(null),
  JSON.parse('{"__proto__": {"polluted": 1}}'),
  new Foreign(),
  new Date(0),
  new Map(),
  /x/,
  null,
  undefined,
  [],
  [{}],
  '',
  '{}',
  0,
  1,
  Number.NaN,
  true,
  false,
  Symbol('x'),
  10n,
  () => ({}),
]

describe('a streamed run answer from a hostile agent', () => {
  it('is accepted exactly when z.object({}) accepts it', () => {
    const reference = z.object({})
    for (const answer of ANSWERS) {
      const expected = reference.safeParse(answer).success
      expect([answer, STREAMED_RUN.result.safeParse(answer).success]).toEqual([answer, expected])
    }
  })

  it('refuses an answer that is not an object (the run fails with INTERNAL, see agent-link)', () => {
    for (const answer of [null, [], 'ok', 1, true, undefined]) {
      expect(STREAMED_RUN.result.safeParse(answer).success).toBe(false)
    }
    expect(STREAMED_RUN.result.safeParse({}).success).toBe(true)
  })
})
