import { Counter, Gauge, Histogram, Registry } from 'prom-client'

/** The runner's Prometheus metrics, on a registry of its own (one per app). */
export class RunnerMetrics {
  /** The registry `/metrics` serves. */
  readonly registry = new Registry()
  /** Sandboxes by status. */
  readonly sandboxes: Gauge<'status'>
  /** Sessions recorded. */
  readonly sessions: Gauge
  /** Runs finished, by transport and outcome. */
  readonly runs: Counter<'via' | 'outcome'>
  /** Wall time of runs as the runner sees them. */
  readonly runDuration: Histogram<'via'>
  /** Output bytes streamed from agents to clients. */
  readonly bytesStreamed: Counter
  /** Errors answered, by code. */
  readonly errors: Counter<'code'>
  /** Shell WebSockets open. */
  readonly shellSockets: Gauge

  /** Creates the metrics; `collect` callbacks read live counts when scraped. */
  constructor(collect: { sandboxes: () => Record<string, number>; sessions: () => number }) {
    const registers = [this.registry]
    this.sandboxes = new Gauge({
      name: 'conch_sandboxes',
      help: 'Sandboxes by status',
      labelNames: ['status'],
      registers,
      collect() {
        this.reset()
        for (const [status, n] of Object.entries(collect.sandboxes())) this.set({ status }, n)
      },
    })
    this.sessions = new Gauge({
      name: 'conch_sessions',
      help: 'Sessions recorded across sandboxes',
      registers,
      collect() {
        this.set(collect.sessions())
      },
    })
    this.runs = new Counter({
      name: 'conch_runs_total',
      help: 'Runs finished',
      labelNames: ['via', 'outcome'],
      registers,
    })
    this.runDuration = new Histogram({
      name: 'conch_run_duration_seconds',
      help: 'Run latency from request to exit, as seen by the runner',
      labelNames: ['via'],
      buckets: [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300],
      registers,
    })
    this.bytesStreamed = new Counter({
      name: 'conch_bytes_streamed_total',
      help: 'Output bytes received from agents',
      registers,
    })
    this.errors = new Counter({
      name: 'conch_errors_total',
      help: 'Errors answered to clients, by code',
      labelNames: ['code'],
      registers,
    })
    this.shellSockets = new Gauge({ name: 'conch_shell_sockets', help: 'Shell WebSockets open', registers })
  }
}
