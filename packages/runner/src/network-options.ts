import type { EgressCredentials } from './egress-credentials.ts'
import type { EgressResolver } from './egress-resolver.ts'

/** The operator's network settings for ports and egress. */
export interface NetworkOptions {
  /** Whether `public: true` exposures are allowed. */
  allowPublicPorts: boolean
  /** Wildcard domain for host-based preview URLs (`3000-<id>.<domain>`), or null. */
  previewDomain: string | null
  /** CIDRs in loopback, private or reserved ranges that egress may reach anyway (none by default). */
  egressPermit?: readonly string[]
  /** How egress resolves names (the system resolver by default). */
  egressResolver?: EgressResolver
  /** Credentials the egress proxy may inject, by name (`--egress-credentials`); none by default. */
  egressCredentials?: EgressCredentials
  /** PEM certificates trusted for upstream TLS of injected requests besides Node's roots. */
  egressUpstreamCa?: readonly string[]
}
