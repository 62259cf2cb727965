import { describe, expect, it } from 'vitest'
import { PortTokens } from './port-token.ts'

describe('port tokens', () => {
  const tokens = new PortTokens('k'.repeat(64))
  const grant = { sandboxId: 'sb_abcdefgh1234', port: 3000, expiresAt: 2_000 }
  const token = tokens.mint(grant)

  it('open their own sandbox and port until they expire', () => {
    expect(tokens.verify(token, 'sb_abcdefgh1234', 3000, 1_999)).toBe(true)
    expect(tokens.verify(token, 'sb_abcdefgh1234', 3000, 2_000)).toBe(false)
  })

  it('open no other sandbox or port, and no edited or foreign-key token', () => {
    expect(tokens.verify(token, 'sb_abcdefgh9999', 3000, 0)).toBe(false)
    expect(tokens.verify(token, 'sb_abcdefgh1234', 3001, 0)).toBe(false)
    expect(tokens.verify(token.replace('.2000.', '.9999999.'), 'sb_abcdefgh1234', 3000, 0)).toBe(false)
    expect(tokens.verify(token.replace('.3000.', '.3001.'), 'sb_abcdefgh1234', 3001, 0)).toBe(false)
    expect(new PortTokens('other').verify(token, 'sb_abcdefgh1234', 3000, 0)).toBe(false)
    for (const bad of ['', 'cpt_', `${token} `, token.toUpperCase(), token.slice(0, -1)])
      expect(tokens.verify(bad, 'sb_abcdefgh1234', 3000, 0), bad).toBe(false)
  })

  it('open the port only under the epoch of the exposure they were minted for', () => {
    const epoch = 'epoch-one'
    const under = tokens.mint(grant, epoch)
    expect(tokens.verify(under, 'sb_abcdefgh1234', 3000, 0, epoch)).toBe(true)
    expect(tokens.verify(under, 'sb_abcdefgh1234', 3000, 0, 'epoch-two')).toBe(false)
    expect(tokens.verify(under, 'sb_abcdefgh1234', 3000, 0)).toBe(false)
    expect(tokens.verify(token, 'sb_abcdefgh1234', 3000, 0, epoch)).toBe(false)
  })
})
