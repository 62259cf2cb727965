import { describe, expect, it } from 'vitest'
import { RunnerMetrics } from './runner-metrics.ts'

describe('per-sandbox usage gauges', () => {
  it('exports each sandbox usage by id and drops a sandbox that is gone at the next scrape', async () => {
    const metrics = new RunnerMetrics({ sandboxes: () => ({}), sessions: () => 0 })
    const usage = { memoryBytes: 1000, memoryPeakBytes: 2000, cpuSeconds: 1.5, pids: 4, oomKills: 1 }
    metrics.setUsage([
      { sandboxId: 'sb_a', usage },
      { sandboxId: 'sb_b', usage: { ...usage, memoryPeakBytes: null } },
    ])
    const text = await metrics.registry.metrics()
    expect(text).toContain('conch_sandbox_memory_bytes{sandbox="sb_a"} 1000')
    expect(text).toContain('conch_sandbox_memory_peak_bytes{sandbox="sb_a"} 2000')
    expect(text).not.toContain('conch_sandbox_memory_peak_bytes{sandbox="sb_b"}')
    expect(text).toContain('conch_sandbox_cpu_seconds{sandbox="sb_b"} 1.5')
    expect(text).toContain('conch_sandbox_pids{sandbox="sb_a"} 4')
    expect(text).toContain('conch_sandbox_oom_kills{sandbox="sb_a"} 1')
    metrics.setUsage([{ sandboxId: 'sb_b', usage }])
    expect(await metrics.registry.metrics()).not.toContain('sandbox="sb_a"')
  })
})
