import { describe, expect, it } from 'vitest'
import { boundedErrorDetails } from './bounded-error-details.ts'
import { ErrorCode } from './error-codes.ts'
import { ERROR_DETAILS } from './error-details.ts'
import { ERROR_SUGGESTIONS } from './error-suggestions.ts'

describe('error details and suggestions', () => {
  it('has a details schema and a one-clause suggestion for every code', () => {
    expect(Object.keys(ERROR_DETAILS).sort()).toEqual([...ErrorCode.options].sort())
    expect(Object.keys(ERROR_SUGGESTIONS).sort()).toEqual([...ErrorCode.options].sort())
    for (const code of ErrorCode.options) {
      const text = ERROR_SUGGESTIONS[code]
      expect(text.length, code).toBeGreaterThan(10)
      expect(text.length, code).toBeLessThanOrEqual(100)
      expect(text, code).toMatch(/^[a-z]/)
      expect(text, code).not.toMatch(/[.;]$/)
    }
  })

  it('gives no two codes the same suggestion', () => {
    const texts = Object.values(ERROR_SUGGESTIONS)
    expect(new Set(texts).size).toBe(texts.length)
  })

  it('keeps limit details and refuses a limit without its value', () => {
    expect(boundedErrorDetails('TOO_MANY_SESSIONS', { limit: 4, value: 4 })).toEqual({ limit: 4, value: 4 })
    expect(boundedErrorDetails('TOO_MANY_SESSIONS', { limit: 4 })).toBeUndefined()
    expect(boundedErrorDetails('TOO_MANY_SESSIONS', { limit: -1, value: 'x' })).toBeUndefined()
  })

  it('gives codes without facts no details', () => {
    expect(boundedErrorDetails('UNAUTHORIZED', { earliestOffset: 1 })).toBeUndefined()
    expect(boundedErrorDetails('INTERNAL', undefined)).toBeUndefined()
  })
})
