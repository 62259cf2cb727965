import { describe, expect, it } from 'vitest'
import { OutputLog } from './output-log.ts'
import { ScrollbackBudget } from './scrollback-budget.ts'

const KB = 1024

describe('a scrollback budget shared by logs', () => {
  it('keeps the sum of its logs within the budget, each log within its own bound too', () => {
    const budget = new ScrollbackBudget(64 * KB)
    const logs = Array.from({ length: 8 }, () => new OutputLog(32 * KB, () => {}, budget))
    for (let i = 0; i < 2000; i++) {
      const log = logs[i % logs.length]!
      log.appendRunStart(`r${i}`)
      log.appendData('stdout', `r${i}`, Buffer.alloc(100, 'x'))
      log.appendRunExit({ id: `r${i}`, code: 0, timedOut: false, durationMs: 1 })
    }
    const sum = logs.reduce((s, l) => s + l.heldBytes, 0)
    expect(sum).toBe(budget.heldBytes)
    expect(sum).toBeLessThanOrEqual(64 * KB)
    for (const log of logs) expect(log.heldBytes).toBeLessThanOrEqual(32 * KB)
  })

  it('evicts from the largest log first, so a quiet log keeps its output', () => {
    const budget = new ScrollbackBudget(64 * KB)
    const quiet = new OutputLog(1 << 20, () => {}, budget)
    const chatty = new OutputLog(1 << 20, () => {}, budget)
    quiet.appendData('stdout', null, Buffer.from('keep me\n'))
    for (let i = 0; i < 1000; i++) chatty.appendData('stdout', null, Buffer.alloc(1000, 'y'))
    expect(budget.heldBytes).toBeLessThanOrEqual(64 * KB)
    expect(quiet.startOffset).toBe(0)
    expect(quiet.readFrom(0)).toMatchObject([{ type: 'shell_out', data: Buffer.from('keep me\n') }])
    expect(chatty.startOffset).toBeGreaterThan(0)
  })

  it('takes back everything a released log held', () => {
    const budget = new ScrollbackBudget(64 * KB)
    const gone = new OutputLog(1 << 20, () => {}, budget)
    const other = new OutputLog(1 << 20, () => {}, budget)
    for (let i = 0; i < 20; i++) gone.appendData('stdout', null, Buffer.alloc(1000, 'z'))
    other.appendData('stdout', null, Buffer.from('x'))
    gone.release()
    expect(budget.logs).toBe(1)
    expect(budget.heldBytes).toBe(other.heldBytes)
    // What the released log held no longer counts: the other log may now grow to the budget.
    for (let i = 0; i < 60; i++) other.appendData('stdout', null, Buffer.alloc(500, 'w'))
    expect(other.startOffset).toBe(0)
  })
})
