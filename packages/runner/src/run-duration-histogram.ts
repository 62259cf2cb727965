// The runner's histogram of run durations (`conch_run_duration_seconds`, by `via`), kept as
// plain counts and exposed to prom-client's registry as a metric of its own. Every run on a
// shell socket records one observation; prom-client's Histogram builds a label hash string,
// two objects and a closure per observation and looks its bucket up by a number-keyed property
// (a runtime call), a few percent of the runner's CPU per pipelined run. Here an observation
// is a scan of the bounds and three additions; the registry reads the same series as
// prom-client's Histogram would write them (cumulative `_bucket` with `le`, `+Inf`, `_sum`,
// `_count`).

/** The counts of one `via`. */
interface Series {
  /** Observations per bucket, not cumulative; the last slot is above every bound. */
  counts: number[]
  sum: number
  count: number
}

/** One value as prom-client's registry reads it. */
interface MetricValue {
  labels: Record<string, string | number>
  value: number
  metricName: string
}

/** A run-duration histogram labelled by `via`; register it with `registry.registerMetric`. */
export class RunDurationHistogram {
  /** The metric's name. */
  readonly name: string
  /** The metric's help text. */
  readonly help: string
  /** Its Prometheus type. */
  readonly type = 'histogram'
  /** How registries merge it across workers (as prom-client's Histogram). */
  readonly aggregator = 'sum'
  readonly #bounds: readonly number[]
  readonly #series = new Map<string, Series>()

  /** A histogram named `name` with these upper bounds (seconds, ascending). */
  constructor(name: string, help: string, bounds: readonly number[]) {
    this.name = name
    this.help = help
    this.#bounds = [...bounds].sort((a, b) => a - b)
  }

  /** Records one run of `labels.via` that took `seconds`; a value that is not finite is dropped. */
  observe(labels: { via: string }, seconds: number): void {
    if (!Number.isFinite(seconds)) return
    let series = this.#series.get(labels.via)
    if (series === undefined) {
      series = { counts: new Array<number>(this.#bounds.length + 1).fill(0), sum: 0, count: 0 }
      this.#series.set(labels.via, series)
    }
    const bounds = this.#bounds
    let i = 0
    while (i < bounds.length && seconds > bounds[i]!) i++
    series.counts[i]! += 1
    series.sum += seconds
    series.count += 1
  }

  /** Forgets every observation. */
  reset(): void {
    this.#series.clear()
  }

  /** The series as prom-client's registry reads a metric. */
  async get(): Promise<{
    name: string
    help: string
    type: string
    values: MetricValue[]
    aggregator: string
  }> {
    const values: MetricValue[] = []
    const bucket = `${this.name}_bucket`
    for (const [via, series] of this.#series) {
      let acc = 0
      this.#bounds.forEach((le, i) => {
        acc += series.counts[i]!
        values.push({ labels: { le, via }, value: acc, metricName: bucket })
      })
      values.push(
        { labels: { le: '+Inf', via }, value: series.count, metricName: bucket },
        { labels: { via }, value: series.sum, metricName: `${this.name}_sum` },
        { labels: { via }, value: series.count, metricName: `${this.name}_count` },
      )
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}
