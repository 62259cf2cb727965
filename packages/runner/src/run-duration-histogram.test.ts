import { Histogram, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { RunDurationHistogram } from './run-duration-histogram.ts'
import { RunnerMetrics } from './runner-metrics.ts'

const BOUNDS = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300]

describe('run duration histogram', () => {
  it('exposes exactly the series prom-client Histogram writes for the same observations', async () => {
    const ours = new Registry()
    const theirs = new Registry()
    const mine = new RunDurationHistogram('conch_run_duration_seconds', 'Run latency', BOUNDS)
    ours.registerMetric(mine as unknown as Histogram)
    const reference = new Histogram({
      name: 'conch_run_duration_seconds',
      help: 'Run latency',
      labelNames: ['via'],
      buckets: BOUNDS,
      registers: [theirs],
    })
    // On a bound, between bounds, below the first, above the last, zero: each edge of a bucket.
    const values = [0, 0.0002, 0.00021, 0.0005, 0.003, 1, 1.5, 300, 301, 1e9]
    for (const [i, v] of values.entries()) {
      const via = i % 3 === 0 ? 'rest' : 'shell'
      mine.observe({ via }, v)
      reference.observe({ via }, v)
    }
    expect(await ours.metrics()).toBe(await theirs.metrics())
    // The JSON form too, but for prom-client's exemplar slots (null: the runner keeps none).
    const plain = (metrics: Awaited<ReturnType<Registry['getMetricsAsJSON']>>) =>
      metrics.map((m) => ({ ...m, values: m.values.map(({ labels, value }) => ({ labels, value })) }))
    expect(plain(await ours.getMetricsAsJSON())).toEqual(plain(await theirs.getMetricsAsJSON()))
  })

  it('drops a value that is not a finite number instead of poisoning the sum', async () => {
    const h = new RunDurationHistogram('d', 'h', [1])
    h.observe({ via: 'shell' }, Number.NaN)
    h.observe({ via: 'shell' }, Number.POSITIVE_INFINITY)
    h.observe({ via: 'shell' }, 0.5)
    const { values } = await h.get()
    expect(values.find((v) => v.metricName === 'd_sum')?.value).toBe(0.5)
    expect(values.find((v) => v.metricName === 'd_count')?.value).toBe(1)
  })
})

describe('shell run tallies', () => {
  it('counts each ended shell run by outcome at the next scrape, and only once', async () => {
    const metrics = new RunnerMetrics({ sandboxes: () => ({}), sessions: () => 0 })
    metrics.shellRunEnded(false, 0.001)
    metrics.shellRunEnded(false, 0.002)
    metrics.shellRunEnded(true, 2)
    metrics.runs.inc({ via: 'shell', outcome: 'closed' })
    const text = await metrics.registry.metrics()
    expect(text).toContain('conch_runs_total{via="shell",outcome="exit"} 2')
    expect(text).toContain('conch_runs_total{via="shell",outcome="timeout"} 1')
    expect(text).toContain('conch_runs_total{via="shell",outcome="closed"} 1')
    expect(text).toContain('conch_run_duration_seconds_count{via="shell"} 3')
    expect(text).toContain('conch_run_duration_seconds_bucket{le="0.001",via="shell"} 1')
    metrics.shellRunEnded(false, 0.001)
    const next = await metrics.registry.metrics()
    expect(next).toContain('conch_runs_total{via="shell",outcome="exit"} 3')
    expect(next).toContain('conch_runs_total{via="shell",outcome="timeout"} 1')
    expect(next).toContain('conch_run_duration_seconds_count{via="shell"} 4')
  })

  it('writes no shell series before a shell run ended', async () => {
    const metrics = new RunnerMetrics({ sandboxes: () => ({}), sessions: () => 0 })
    const text = await metrics.registry.metrics()
    expect(text).not.toContain('via="shell"')
    expect(text).toContain('# TYPE conch_run_duration_seconds histogram')
  })
})
