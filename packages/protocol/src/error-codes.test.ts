import { describe, expect, it } from 'vitest'
import { ErrorCode } from './error-codes.ts'
import { ERROR_STATUS } from './error-status.ts'

describe('error codes', () => {
  it('maps every code to an HTTP error status', () => {
    for (const code of ErrorCode.options) {
      expect(ERROR_STATUS[code]).toBeGreaterThanOrEqual(400)
      expect(ERROR_STATUS[code]).toBeLessThan(600)
    }
    expect(Object.keys(ERROR_STATUS).sort()).toEqual([...ErrorCode.options].sort())
  })
})
