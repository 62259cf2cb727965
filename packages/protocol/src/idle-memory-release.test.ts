import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { IdleReleaseClock, releaseMemory, watchIdleMemory } from './idle-memory-release.ts'

const OPTIONS = { intervalMs: 1000, busyUtilization: 0.02, quietIntervals: 3 }

describe('the idle memory release', () => {
  it('releases once, after a busy spell and the given number of quiet intervals', () => {
    const clock = new IdleReleaseClock(OPTIONS)
    // Idle from the start: nothing to give back.
    expect([0, 0, 0, 0, 0].map((u) => clock.tick(u))).toEqual([false, false, false, false, false])
    // Busy, then quiet: released on the third quiet interval, then not again while quiet.
    expect([0.5, 0.01, 0, 0.02, 0, 0, 0].map((u) => clock.tick(u))).toEqual([
      false,
      false,
      false,
      true,
      false,
      false,
      false,
    ])
    // Work during the quiet count starts it again.
    expect([0.3, 0, 0, 0.1, 0, 0, 0].map((u) => clock.tick(u))).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
      true,
    ])
  })

  it('gives a grown heap back to the system', () => {
    let garbage: object[] | null = Array.from({ length: 600_000 }, (_, i) => ({ i, s: `x${i}` }))
    const grown = process.memoryUsage().heapTotal
    expect(garbage.length).toBe(600_000)
    garbage = null
    releaseMemory()
    expect(process.memoryUsage().heapTotal).toBeLessThan(grown - 20 * 1024 * 1024)
  })

  it('leaves no gc function to other code or to later contexts', () => {
    const stop = watchIdleMemory(OPTIONS)
    stop()
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe('undefined')
    expect(runInNewContext('typeof gc')).toBe('undefined')
  })
})
