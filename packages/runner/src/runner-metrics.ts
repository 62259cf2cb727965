import type { SandboxUsage } from '@conch/protocol'
import { Counter, Gauge, type Histogram, Registry } from 'prom-client'
import { RunDurationHistogram } from './run-duration-histogram.ts'

/** One sandbox's usage, as `/metrics` reports it. */
export interface SandboxUsageSample {
  /** Sandbox id (the `sandbox` label). */
  sandboxId: string
  /** Its usage. */
  usage: SandboxUsage
}

/** The labels of runs on shell sockets. */
const SHELL = { via: 'shell' }

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
  readonly runDuration: RunDurationHistogram
  /** Output bytes streamed from agents to clients. */
  readonly bytesStreamed: Counter
  /** Errors answered, by code. */
  readonly errors: Counter<'code'>
  /** Bytes through the egress proxy, out of sandboxes and into them. */
  readonly egressBytes: Counter<'direction'>
  /** Shell WebSockets open. */
  readonly shellSockets: Gauge
  /** Memory each sandbox uses now. */
  readonly sandboxMemory: Gauge<'sandbox'>
  /** The most memory each sandbox has used at once. */
  readonly sandboxMemoryPeak: Gauge<'sandbox'>
  /** CPU time each sandbox has used. */
  readonly sandboxCpu: Gauge<'sandbox'>
  /** Processes and threads in each sandbox. */
  readonly sandboxPids: Gauge<'sandbox'>
  /** OOM kills in each sandbox. */
  readonly sandboxOomKills: Gauge<'sandbox'>
  /** Create requests served from the warm pool, by driver. */
  readonly warmPoolHits: Counter<'driver'>
  /** Create requests the warm pool could not serve (none ready, or options it does not hold), by driver. */
  readonly warmPoolMisses: Counter<'driver'>
  /** Sandboxes ready in the warm pool, by driver. */
  readonly warmPoolReady: Gauge<'driver'>
  /** Runs on shell sockets that ended since the last scrape, by outcome, not yet in `runs`. */
  #shellExits = 0
  #shellTimeouts = 0

  /** Creates the metrics; `collect` callbacks read live counts when scraped. */
  constructor(collect: {
    sandboxes: () => Record<string, number>
    sessions: () => number
    warmPool?: () => Record<string, number>
  }) {
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
      collect: () => this.#foldShellRuns(),
    })
    this.runDuration = new RunDurationHistogram(
      'conch_run_duration_seconds',
      'Run latency from request to exit, as seen by the runner',
      [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300],
    )
    // The registry reads it as it reads prom-client's own metrics (`get()`).
    this.registry.registerMetric(this.runDuration as unknown as Histogram)
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
    this.egressBytes = new Counter({
      name: 'conch_egress_bytes_total',
      help: 'Bytes relayed by the egress proxy, out of sandboxes (out) and into them (in)',
      labelNames: ['direction'],
      registers,
    })
    this.shellSockets = new Gauge({ name: 'conch_shell_sockets', help: 'Shell WebSockets open', registers })
    const perSandbox = (name: string, help: string): Gauge<'sandbox'> =>
      new Gauge({ name, help, labelNames: ['sandbox'], registers })
    this.sandboxMemory = perSandbox('conch_sandbox_memory_bytes', 'Memory a sandbox uses now')
    this.sandboxMemoryPeak = perSandbox(
      'conch_sandbox_memory_peak_bytes',
      'The most memory a sandbox has used at once',
    )
    this.sandboxCpu = perSandbox('conch_sandbox_cpu_seconds', 'CPU time a sandbox has used (user and system)')
    this.sandboxPids = perSandbox('conch_sandbox_pids', 'Processes and threads in a sandbox')
    this.sandboxOomKills = perSandbox(
      'conch_sandbox_oom_kills',
      'Processes killed because a sandbox hit its memory limit',
    )
    this.warmPoolHits = new Counter({
      name: 'conch_warm_pool_hits_total',
      help: 'Sandbox creates served from the warm pool',
      labelNames: ['driver'],
      registers,
    })
    this.warmPoolMisses = new Counter({
      name: 'conch_warm_pool_misses_total',
      help: 'Sandbox creates the warm pool could not serve',
      labelNames: ['driver'],
      registers,
    })
    this.warmPoolReady = new Gauge({
      name: 'conch_warm_pool_ready',
      help: 'Sandboxes ready in the warm pool',
      labelNames: ['driver'],
      registers,
      collect() {
        this.reset()
        for (const [driver, n] of Object.entries(collect.warmPool?.() ?? {})) this.set({ driver }, n)
      },
    })
  }

  /**
   * A run on a shell socket ended (`timedOut`: by its timeout) after `seconds`. Every run
   * passes here, so it only adds to plain counts; `runs` takes them in when scraped.
   */
  shellRunEnded(timedOut: boolean, seconds: number): void {
    if (timedOut) this.#shellTimeouts += 1
    else this.#shellExits += 1
    this.runDuration.observe(SHELL, seconds)
  }

  #foldShellRuns(): void {
    const runs = this.runs
    if (this.#shellExits > 0) runs.inc({ via: 'shell', outcome: 'exit' }, this.#shellExits)
    if (this.#shellTimeouts > 0) runs.inc({ via: 'shell', outcome: 'timeout' }, this.#shellTimeouts)
    this.#shellExits = 0
    this.#shellTimeouts = 0
  }

  /** Replaces the per-sandbox gauges with these samples, so destroyed sandboxes drop out. */
  setUsage(samples: readonly SandboxUsageSample[]): void {
    const gauges = [
      this.sandboxMemory,
      this.sandboxMemoryPeak,
      this.sandboxCpu,
      this.sandboxPids,
      this.sandboxOomKills,
    ]
    for (const gauge of gauges) gauge.reset()
    for (const { sandboxId, usage } of samples) {
      const labels = { sandbox: sandboxId }
      this.sandboxMemory.set(labels, usage.memoryBytes)
      if (usage.memoryPeakBytes !== null) this.sandboxMemoryPeak.set(labels, usage.memoryPeakBytes)
      this.sandboxCpu.set(labels, usage.cpuSeconds)
      this.sandboxPids.set(labels, usage.pids)
      this.sandboxOomKills.set(labels, usage.oomKills)
    }
  }
}
