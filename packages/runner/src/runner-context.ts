import type { PortsOptions } from './plugins/ports-plugin.ts'
import type { RunnerLimits } from './runner-limits.ts'
import type { RunnerMetrics } from './runner-metrics.ts'
import type { SandboxManager } from './sandbox-manager.ts'
import type { StateStore } from './state-store.ts'

/** What every plugin of the app shares: state, the sandbox manager, limits, metrics, clock. */
export interface RunnerContext {
  /** Sandboxes and their agent links. */
  manager: SandboxManager
  /** Durable state. */
  store: StateStore
  /** Limits. */
  limits: RunnerLimits
  /** Metrics. */
  metrics: RunnerMetrics
  /** Clock (ms since the epoch). */
  now: () => number
  /** Runner version. */
  version: string
  /** Hashes of the API keys accepted. */
  apiKeyHashes: readonly string[]
  /** The runner's shard name (in every new sandbox id), or null. */
  shard: string | null
  /** Port exposure settings; no public ports and no preview domain when absent. */
  network?: PortsOptions
}
