import type { EgressGateway } from './egress-gateway.ts'
import type { NetworkOptions } from './network-options.ts'
import type { PortExposures } from './port-exposures.ts'
import type { RunnerLimits } from './runner-limits.ts'
import type { RunnerMetrics } from './runner-metrics.ts'
import type { SandboxManager } from './sandbox-manager.ts'
import type { SandboxNetworkLimits } from './sandbox-network-limits.ts'
import type { SandboxSnapshots } from './sandbox-snapshots.ts'
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
  /** Snapshots, when the runner keeps them. */
  snapshots?: SandboxSnapshots
  /** Network settings; no public ports, no preview domain and no egress permits when absent. */
  network?: NetworkOptions
  /** Connects sandboxes with an egress allowlist to the egress proxy. */
  egress: EgressGateway
  /** Exposed ports per sandbox. */
  exposures: PortExposures
  /** Connection counts and bandwidth per sandbox, for the port relay and egress. */
  netLimits: SandboxNetworkLimits
}
