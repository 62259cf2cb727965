// Connects sandboxes that have an egress allowlist to the runner's egress proxy.
//
// For such a sandbox the agent listens on 127.0.0.1:EGRESS_PROXY_PORT inside it (`egress.listen`),
// and the runner keeps `PENDING_ACCEPTS` `egress.accept` calls open on its link: each answers
// when a program connects, its channel becomes a `SandboxTcpStream`, and the stream is handed to
// the proxy tagged with the sandbox and its allowlist. A link that drops (runner restart, agent
// unreachable) ends the pending calls; the loops reach the agent again and go on, until the
// sandbox is gone. The policy is kept in the runner's state, so a restarted runner re-arms it.
//
// A sandbox whose policy names credentials also gets its own CA (egress-ca.ts): the key is kept
// in the runner's state beside the policy, and the certificate is written into the sandbox
// (`CA_DIR`) with the variables that make common TLS clients trust it (`caEnv`). The file is the
// host's CA bundle plus the sandbox CA, since SSL_CERT_FILE and friends replace the default trust.
import { readFileSync } from 'node:fs'
import { EGRESS_PROXY_PORT, LIMITS, type NetworkPolicy } from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import type { AgentLink } from './agent-link.ts'
import { EgressAllowlist } from './egress-allowlist.ts'
import type { EgressCa } from './egress-ca.ts'
import { EgressCredentials, type SandboxCredentials } from './egress-credentials.ts'
import type { EgressOrigin, EgressProxy } from './egress-proxy.ts'
import { RunnerError } from './runner-error.ts'
import type { SandboxManager } from './sandbox-manager.ts'
import type { SandboxNetworkLimits } from './sandbox-network-limits.ts'
import { SandboxTcpStream, tcpChannel } from './sandbox-tcp-stream.ts'
import type { StateStore } from './state-store.ts'

/** `egress.accept` calls kept open per sandbox: connections served without waiting on a round trip. */
const PENDING_ACCEPTS = 4
/** Pause before reaching an agent again after its link failed. */
const RETRY_MS = 1_000

/** Where a sandbox's CA certificate and trust bundle are written, inside it. */
export const CA_DIR = '/workspace/.conch'
const CA_FILE = `${CA_DIR}/egress-ca.pem`
const BUNDLE_FILE = `${CA_DIR}/egress-ca-bundle.pem`
/** Where the host's CA bundle is read from (Debian, then Red Hat layouts). */
const HOST_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt']

/** Variables that point TLS clients in the sandbox at its CA (OpenSSL, curl, git, Python, Node). */
export function caEnv(): Record<string, string> {
  return {
    SSL_CERT_FILE: BUNDLE_FILE,
    CURL_CA_BUNDLE: BUNDLE_FILE,
    REQUESTS_CA_BUNDLE: BUNDLE_FILE,
    GIT_SSL_CAINFO: BUNDLE_FILE,
    NODE_EXTRA_CA_CERTS: CA_FILE,
    DENO_CERT: CA_FILE,
  }
}

/** An allowlist checked at create time, with the environment that points programs at the proxy. */
export interface PreparedEgress {
  /** The policy as given. */
  policy: NetworkPolicy
  /** Its parsed allowlist. */
  allowlist: EgressAllowlist
  /** `HTTP_PROXY` and friends, added to the sandbox's base environment. */
  env: Record<string, string>
  /** The credentials it may use (none: null). */
  credentials: SandboxCredentials | null
}

/** What the gateway needs. */
export interface EgressGatewayOptions {
  /** The proxy that serves every sandbox. */
  proxy: EgressProxy
  /** Sandboxes and their links. */
  manager: SandboxManager
  /** Where policies are kept across restarts. */
  store: StateStore
  /** Logger. */
  logger: FastifyBaseLogger
  /** The operator's credentials (none when absent). */
  credentials?: EgressCredentials
  /** Connection cap and bandwidth per sandbox, shared with the port relay. */
  limits: SandboxNetworkLimits
}

/** Arms and re-arms sandboxes' egress. */
export class EgressGateway {
  readonly #o: EgressGatewayOptions
  readonly #armed = new Set<string>()
  readonly #listening = new WeakSet<AgentLink>()
  readonly #credentials: EgressCredentials
  #closed = false

  /** A gateway over `options`. */
  constructor(options: EgressGatewayOptions) {
    this.#o = options
    this.#credentials = options.credentials ?? new EgressCredentials()
  }

  /** Checks a create request's policy; null when the sandbox gets no egress. BAD_REQUEST for a bad rule. */
  prepare(policy: NetworkPolicy | undefined): PreparedEgress | null {
    if (!policy || policy.egress === 'none') return null
    let allowlist: EgressAllowlist
    try {
      allowlist = new EgressAllowlist(policy.egress.allow)
    } catch (error) {
      throw new RunnerError('BAD_REQUEST', `invalid egress rule: ${(error as Error).message}`)
    }
    const proxy = `http://127.0.0.1:${EGRESS_PROXY_PORT}`
    const env = {
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      NO_PROXY: 'localhost,127.0.0.1,::1',
      no_proxy: 'localhost,127.0.0.1,::1',
    }
    const credentials = policy.egress.credentials?.length
      ? this.#credentials.resolve(policy.egress.credentials, allowlist)
      : null
    return { policy, allowlist, env: credentials ? { ...env, ...caEnv() } : env, credentials }
  }

  /** Starts egress for a new sandbox: records its policy, opens the listener, arms the accepts. */
  async start(sandboxId: string, prepared: PreparedEgress): Promise<void> {
    this.#o.store.setMeta(`egress:${sandboxId}`, JSON.stringify(prepared.policy))
    const link = await this.#o.manager.get(sandboxId).link()
    let injection: EgressOrigin['injection'] = null
    if (prepared.credentials) {
      const { EgressCa } = await import('./egress-ca.ts')
      const ca = await EgressCa.create(sandboxId)
      this.#o.store.setMeta(`egress-ca:${sandboxId}`, JSON.stringify(ca.toStored()))
      await writeTrust(link, ca)
      injection = { credentials: prepared.credentials, ca }
    }
    await this.#listen(link)
    this.#arm({ sandboxId, allowlist: prepared.allowlist, injection })
  }

  /** Re-arms every stored sandbox that has a policy (after a runner restart). */
  async restore(): Promise<void> {
    for (const runtime of this.#o.manager.list()) {
      const stored = this.#o.store.getMeta(`egress:${runtime.id}`)
      if (!stored) continue
      let prepared: PreparedEgress | null
      let injection: EgressOrigin['injection'] = null
      try {
        prepared = this.prepare(JSON.parse(stored) as NetworkPolicy)
        const storedCa = this.#o.store.getMeta(`egress-ca:${runtime.id}`)
        if (prepared?.credentials && storedCa) {
          const { EgressCa } = await import('./egress-ca.ts')
          injection = {
            credentials: prepared.credentials,
            ca: await EgressCa.fromStored(JSON.parse(storedCa)),
          }
        }
      } catch (error) {
        // A credential the operator removed since: the sandbox keeps no egress rather than
        // egress without the policy it was created with.
        this.#o.logger.warn(
          { sandboxId: runtime.id, reason: (error as Error).message },
          'egress not restored: the stored policy no longer resolves',
        )
        continue
      }
      if (prepared) this.#arm({ sandboxId: runtime.id, allowlist: prepared.allowlist, injection })
    }
  }

  /** Forgets a destroyed sandbox's policy. */
  forget(sandboxId: string): void {
    this.#o.store.setMeta(`egress:${sandboxId}`, null)
    this.#o.store.setMeta(`egress-ca:${sandboxId}`, null)
    this.#armed.delete(sandboxId)
  }

  /** Stops re-arming (runner shutdown). */
  close(): void {
    this.#closed = true
  }

  async #listen(link: AgentLink): Promise<void> {
    if (this.#listening.has(link)) return
    await link.call('egress.listen', { port: EGRESS_PROXY_PORT }, { timeoutMs: 10_000 })
    this.#listening.add(link)
  }

  #arm(origin: EgressOrigin): void {
    if (this.#armed.has(origin.sandboxId)) return
    this.#armed.add(origin.sandboxId)
    for (let i = 0; i < PENDING_ACCEPTS; i++) void this.#loop(origin)
  }

  /**
   * Counts an accepted connection against the sandbox's cap; past it, the program gets a 429
   * with TOO_MANY_CONNECTIONS as the proxy's answer and the connection closes.
   */
  #admit(sandboxId: string, stream: SandboxTcpStream): boolean {
    let release: () => void
    try {
      release = this.#o.limits.acquire(sandboxId, 'egress')
    } catch (error) {
      const body = `${JSON.stringify((error as RunnerError).toBody())}\n`
      stream.end(
        `HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      )
      this.#o.logger.info({ sandboxId, allowed: false, reason: (error as Error).message }, 'egress refused')
      return false
    }
    stream.once('close', release)
    return true
  }

  async #loop(origin: EgressOrigin): Promise<void> {
    const { sandboxId } = origin
    while (!this.#closed && this.#armed.has(sandboxId)) {
      let link: AgentLink
      try {
        link = await this.#o.manager.get(sandboxId).link()
        await this.#listen(link)
      } catch (error) {
        if (error instanceof RunnerError && error.code === 'SANDBOX_NOT_FOUND') break
        if (error instanceof RunnerError && error.code === 'SANDBOX_NOT_RUNNING') break
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref())
        continue
      }
      const stream = new SandboxTcpStream(tcpChannel(link), {
        linger: true,
        buckets: this.#o.limits.buckets(sandboxId),
      })
      // Until a program connects, a link that drops fails the stream with nobody reading it.
      stream.on('error', () => {})
      try {
        await link.call('egress.accept', { ch: stream.channelId })
      } catch {
        stream.destroy()
        if (link.open) await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref())
        continue
      }
      if (this.#admit(sandboxId, stream)) this.#o.proxy.accept(stream, origin)
    }
    this.#armed.delete(sandboxId)
  }
}

/** Writes the sandbox CA and the trust bundle (host bundle + CA) into the sandbox. */
async function writeTrust(link: AgentLink, ca: EgressCa): Promise<void> {
  let hostBundle = ''
  for (const path of HOST_BUNDLES) {
    try {
      hostBundle = readFileSync(path, 'utf8')
      break
    } catch {}
  }
  await link.call('file.mkdir', { path: CA_DIR, recursive: true }, { timeoutMs: 10_000 })
  await writeFile(link, CA_FILE, ca.certPem)
  await writeFile(link, BUNDLE_FILE, `${hostBundle.trimEnd()}\n${ca.certPem}`)
}

async function writeFile(link: AgentLink, path: string, text: string): Promise<void> {
  const channel = link.openChannel()
  try {
    const done = link.call('file.write', { path, ch: channel.id, mode: 0o644 }, { timeoutMs: 10_000 })
    const bytes = Buffer.from(text)
    for (let at = 0; at < bytes.length; at += LIMITS.maxDataChunkBytes) {
      if (!(await channel.write({ type: 'data' }, bytes.subarray(at, at + LIMITS.maxDataChunkBytes)))) break
    }
    channel.send({ type: 'end' })
    await done
  } finally {
    channel.close()
  }
}
