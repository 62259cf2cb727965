import { describe, expect, it } from 'vitest'
import { isShellOwnedVariable, parseCapture } from './shell-state-capture.ts'

const N = '0123456789abcdef0123456789abcdef'

function records(...fields: string[]): Buffer {
  return Buffer.from(`${fields.join('\0')}\0`)
}

describe('parseCapture', () => {
  it('ignores what a DEBUG trap prints around the records and keeps what lies between them', () => {
    const out = Buffer.concat([
      Buffer.from('noise var\0PATH\0declare -x PATH=/evil\0'),
      records('start', N, '', 'cwd', '', '/w', 'var', 'A', 'declare -- A="1"\n', 'end', N, ''),
      Buffer.from('trailing noise\0var\0B\0declare -- B="2"\0'),
    ])
    const state = parseCapture(out, N)
    expect(state?.cwd).toBe('/w')
    expect(state?.variables).toEqual([{ name: 'A', declaration: 'declare -- A="1"' }])
  })

  it('refuses a capture without its end record, or with records out of step', () => {
    expect(parseCapture(records('start', N, '', 'cwd', '', '/w'), N)).toBeNull()
    expect(parseCapture(records('start', N, '', 'bogus', 'x', 'y', 'end', N, ''), N)).toBeNull()
    expect(parseCapture(records('start', 'f'.repeat(32), '', 'end', 'f'.repeat(32), ''), N)).toBeNull()
  })

  it("drops bash's own variables, the framing's, and a declaration of another name", () => {
    const out = records(
      'start',
      N,
      '',
      'var',
      'BASH_ENV',
      'declare -x BASH_ENV="/x"',
      'var',
      'PPID',
      'declare -ir PPID="1"',
      'var',
      '__conch_snap_v',
      'declare -- __conch_snap_v="x"',
      'var',
      'A',
      'declare -- B="1"',
      'var',
      'OK',
      'declare -x OK="yes"',
      'fn',
      '__conch_end_00aa11bb',
      '__conch_end_00aa11bb () { :; }',
      'end',
      N,
      '',
    )
    const state = parseCapture(out, N)
    expect(state?.variables.map((v) => v.name)).toEqual(['OK'])
    expect(state?.functions).toEqual([])
    expect(['SHELLOPTS', 'RANDOM', 'BASH_REMATCH', 'COMP_WORDS', 'PS1'].every(isShellOwnedVariable)).toBe(
      true,
    )
    expect(isShellOwnedVariable('PATH')).toBe(false)
  })
})
