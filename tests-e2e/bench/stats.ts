// Order statistics for the benchmark: percentiles over one round's samples, and the median
// of a figure across rounds (each figure is reported as the median of its rounds).

/** The p-th percentile (0-100) of the samples, nearest-rank. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!
}

/** The median of the values. */
export function median(values: readonly number[]): number {
  return percentile(values, 50)
}

/** p50, p90 and p99 of one round's latency samples. */
export interface Quantiles {
  p50: number
  p90: number
  p99: number
}

/** The quantiles of one round. */
export function quantiles(samples: readonly number[]): Quantiles {
  return { p50: percentile(samples, 50), p90: percentile(samples, 90), p99: percentile(samples, 99) }
}

/** Each quantile's median across rounds. */
export function medianQuantiles(rounds: readonly Quantiles[]): Quantiles {
  return {
    p50: median(rounds.map((r) => r.p50)),
    p90: median(rounds.map((r) => r.p90)),
    p99: median(rounds.map((r) => r.p99)),
  }
}
