import { Counter, Gauge, Registry } from 'prom-client'
import type { ShardMonitor } from './shard-monitor.ts'

/** The router's Prometheus metrics, on a registry of its own (one per app). */
export class RouterMetrics {
  /** The registry `/metrics` serves. */
  readonly registry = new Registry()
  /** Requests forwarded, by shard and the status class the client got. */
  readonly forwarded: Counter<'shard' | 'status'>
  /** Errors the router answered itself, by code. */
  readonly errors: Counter<'code'>
  /** WebSockets relayed now (shell, terminal, sandbox ports). */
  readonly shellSockets: Gauge
  /** Request bodies being streamed to runners now (sandbox port relay uploads). */
  readonly streamedUploads: Gauge
  /** Sandboxes placed, by shard. */
  readonly placed: Counter<'shard'>

  /** Creates the metrics; shard readiness and load are read from `monitor` when scraped. */
  constructor(monitor: () => ShardMonitor) {
    const registers = [this.registry]
    this.forwarded = new Counter({
      name: 'conch_router_forwarded_total',
      help: 'Requests forwarded to runners, by shard and status class',
      labelNames: ['shard', 'status'],
      registers,
    })
    this.errors = new Counter({
      name: 'conch_router_errors_total',
      help: 'Errors the router answered itself, by code',
      labelNames: ['code'],
      registers,
    })
    this.shellSockets = new Gauge({
      name: 'conch_router_shell_sockets',
      help: 'WebSockets relayed now (shell, terminal, sandbox ports)',
      registers,
    })
    this.streamedUploads = new Gauge({
      name: 'conch_router_streamed_uploads',
      help: 'Requests to runners whose body is streamed now (sandbox port relay uploads)',
      registers,
    })
    this.placed = new Counter({
      name: 'conch_router_placed_total',
      help: 'Sandboxes placed, by shard',
      labelNames: ['shard'],
      registers,
    })
    new Gauge({
      name: 'conch_router_shard_ready',
      help: '1 when the shard answered /readyz ready at the last poll',
      labelNames: ['shard'],
      registers,
      collect() {
        for (const s of monitor().states()) this.set({ shard: s.shard.name }, s.ready ? 1 : 0)
      },
    })
    new Gauge({
      name: 'conch_router_shard_sandboxes',
      help: 'Sandboxes alive on the shard, as last reported',
      labelNames: ['shard'],
      registers,
      collect() {
        for (const s of monitor().states()) this.set({ shard: s.shard.name }, s.sandboxes)
      },
    })
  }
}
