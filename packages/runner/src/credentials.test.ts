import { describe, expect, it } from 'vitest'
import { generateApiKey, generateToken, hashSecret, matchesAnyHash, randomId } from './credentials.ts'

describe('credentials', () => {
  it('generates prefixed secrets that differ each time', () => {
    expect(generateApiKey()).toMatch(/^conch_[\w-]{43}$/)
    expect(generateToken()).toMatch(/^cst_[\w-]{43}$/)
    expect(generateApiKey()).not.toBe(generateApiKey())
    expect(randomId('sb_', 12)).toMatch(/^sb_[A-Za-z0-9]{12}$/)
  })

  it('matches a secret only against its own hash', () => {
    const key = generateApiKey()
    expect(matchesAnyHash(key, [hashSecret('other'), hashSecret(key)])).toBe(true)
    expect(matchesAnyHash(`${key}x`, [hashSecret(key)])).toBe(false)
    expect(matchesAnyHash(key, [])).toBe(false)
  })
})
