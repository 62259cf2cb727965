import { describe, expect, it } from 'vitest'
import { ERROR_STATUS, ErrorCode } from './error-codes.ts'

describe('error codes', () => {
  it('maps every code to an HTTP error status', () => {
    for (const code of ErrorCode.options) {
      expect(ERROR_STATUS[code]).toBeGreaterThanOrEqual(400)
      expect(ERROR_STATUS[code]).toBeLessThan(600)
    }
    expect(Object.keys(ERROR_STATUS).sort()).toEqual([...ErrorCode.options].sort())
  })
})
