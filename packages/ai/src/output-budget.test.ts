import { describe, expect, it } from 'vitest'
import { OutputBudget } from './output-budget.ts'

function fill(budget: number, chunks: string[]) {
  const b = new OutputBudget(budget)
  for (const c of chunks) b.push(c)
  return b.finish()
}

describe('OutputBudget', () => {
  it('keeps output that fits whole, with nothing elided', () => {
    expect(fill(10, ['abc', 'defg', 'hij'])).toEqual({ text: 'abcdefghij', totalBytes: 10, elidedBytes: 0 })
  })

  it('keeps the first and the last half of the budget and counts what it left out', () => {
    const chunks = Array.from({ length: 1000 }, (_, i) => `${String(i).padStart(3, '0')}\n`)
    const r = fill(40, chunks)
    expect(r.totalBytes).toBe(4000)
    expect(r.elidedBytes).toBe(3960)
    expect(r.text.startsWith('000\n001\n002\n003\n004\n')).toBe(true)
    expect(r.text.endsWith('995\n996\n997\n998\n999\n')).toBe(true)
    expect(r.text).toContain('3960 bytes elided (of 4000)')
  })

  it('takes the tail from inside one large chunk', () => {
    const r = fill(8, [`${'a'.repeat(100)}WXYZ`])
    expect(r.text.startsWith('aaaa\n')).toBe(true)
    expect(r.text.endsWith('\nWXYZ')).toBe(true)
    expect(r.elidedBytes).toBe(96)
  })

  it('counts bytes, not characters, for multi-byte text', () => {
    const r = fill(1000, ['é'.repeat(10)])
    expect(r.totalBytes).toBe(20)
    expect(r.text).toBe('é'.repeat(10))
  })

  it('reports the last lines for progress', () => {
    const b = new OutputBudget(1000)
    b.push('one\ntwo\nthree\nfour\n')
    expect(b.lastLines(2)).toBe('three\nfour')
  })
})
