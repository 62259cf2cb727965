// Egress credentials: headers the egress proxy adds to a sandbox's requests to one host, so the
// secret is used on the sandbox's behalf and never enters it.
//
// Model: the operator defines credentials in a file the runner reads at start (`--egress-credentials`),
// each with a name, one DNS host, an optional port, and the headers to add. A create request
// (API key only) names the credentials its sandbox may use; the runner checks that each exists
// and that its host is on the sandbox's allowlist. Only names travel through the API, the runner's
// state and snapshots; the values stay in the runner's memory. Over TLS the proxy terminates the
// connection to inject them (egress-tls-terminator.ts); over plain HTTP only when the operator set
// `insecureHttp` for that credential, since the value would cross the network in clear.
import { z } from 'zod'
import type { EgressAllowlist } from './egress-allowlist.ts'
import { normalizeHost } from './egress-allowlist.ts'
import { RunnerError } from './runner-error.ts'

/** A credential's name as a create request gives it. */
export const CREDENTIAL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/

/** One credential as the operator writes it. */
export const EgressCredentialSpec = z
  .object({
    /** The DNS name the headers are sent to (exactly this name; no wildcards). */
    host: z.string().min(1).max(253),
    /** The only port they are sent to; any port the allowlist admits for the host when absent. */
    port: z.number().int().min(1).max(65_535).optional(),
    /** Header name → value, added to (and replacing) the request's own headers of those names. */
    headers: z.record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/), z.string().min(1).max(8192)),
    /** Also inject into plain http:// requests (the value then crosses the network unencrypted). */
    insecureHttp: z.boolean().optional(),
  })
  .strict()
/** One credential as the operator writes it. */
export type EgressCredentialSpec = z.infer<typeof EgressCredentialSpec>

/** The operator's credentials file: name → credential. */
export const EgressCredentialFile = z.record(z.string().regex(CREDENTIAL_NAME), EgressCredentialSpec)

/** A credential resolved for one sandbox. */
interface Grant {
  name: string
  host: string
  port: number | undefined
  headers: Readonly<Record<string, string>>
  insecureHttp: boolean
}

/** The credentials one sandbox may use, by host. */
export class SandboxCredentials {
  readonly #grants: readonly Grant[]

  constructor(grants: readonly Grant[]) {
    this.#grants = grants
  }

  /** The credentials for a TLS connection to `host:port`, or null when none apply. */
  forTls(host: string, port: number): InjectedCredentials | null {
    return this.#match(host, port, false)
  }

  /** The credentials for a plain-HTTP request to `host:port` (only those marked insecureHttp). */
  forPlainHttp(host: string, port: number): InjectedCredentials | null {
    return this.#match(host, port, true)
  }

  #match(host: string, port: number, plain: boolean): InjectedCredentials | null {
    const target = normalizeHost(host)
    if (target?.kind !== 'name') return null
    const grants = this.#grants.filter(
      (g) =>
        g.host === target.value && (g.port === undefined || g.port === port) && (!plain || g.insecureHttp),
    )
    if (grants.length === 0) return null
    const headers: Record<string, string> = {}
    for (const g of grants) for (const [k, v] of Object.entries(g.headers)) headers[k.toLowerCase()] = v
    return { names: grants.map((g) => g.name), headers }
  }
}

/** Headers to add to one exchange, and the names of the credentials they came from (for logs). */
export interface InjectedCredentials {
  /** Credential names; safe to log. */
  names: readonly string[]
  /** Lowercased header name → secret value; never logged or returned. */
  headers: Readonly<Record<string, string>>
}

/** The operator's credentials, as the runner holds them. */
export class EgressCredentials {
  readonly #specs: ReadonlyMap<string, EgressCredentialSpec>

  /** Credentials from the parsed file (see `parse`). */
  constructor(specs: Readonly<Record<string, EgressCredentialSpec>> = {}) {
    this.#specs = new Map(Object.entries(specs))
  }

  /**
   * Parses the operator's file; the error names the entry and field that are wrong, never a
   * header's value.
   */
  static parse(text: string): EgressCredentials {
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      throw new Error('the egress credentials file is not JSON')
    }
    const parsed = EgressCredentialFile.safeParse(json)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new Error(
        `the egress credentials file is invalid at ${issue?.path.join('.') || '(top)'}: ${issue?.message ?? 'bad value'}`,
      )
    }
    for (const [name, spec] of Object.entries(parsed.data))
      if (normalizeHost(spec.host)?.kind !== 'name')
        throw new Error(`egress credential "${name}": host "${spec.host.slice(0, 100)}" is not a DNS name`)
    return new EgressCredentials(parsed.data)
  }

  /** How many the operator defined. */
  get size(): number {
    return this.#specs.size
  }

  /**
   * The credentials `names` grant a sandbox with `allowlist`. BAD_REQUEST when a name is unknown
   * or its host (on its port, when it names one) is not on the allowlist.
   */
  resolve(names: readonly string[], allowlist: EgressAllowlist): SandboxCredentials {
    const grants: Grant[] = []
    for (const name of new Set(names)) {
      const spec = this.#specs.get(name)
      if (!spec)
        throw new RunnerError(
          'BAD_REQUEST',
          `this runner has no egress credential named "${name.slice(0, 64)}"; the operator defines them in the file given to --egress-credentials`,
        )
      const host = normalizeHost(spec.host)?.value ?? spec.host
      const listed = spec.port === undefined ? allowlist.allowsHost(host) : allowlist.allows(host, spec.port)
      if (!listed)
        throw new RunnerError(
          'BAD_REQUEST',
          `egress credential "${name}" is for ${host}${spec.port ? `:${spec.port}` : ''}, which is not on this sandbox's allowlist; add it to network.egress.allow`,
        )
      grants.push({
        name,
        host,
        port: spec.port,
        headers: spec.headers,
        insecureHttp: spec.insecureHttp === true,
      })
    }
    return new SandboxCredentials(grants)
  }
}
