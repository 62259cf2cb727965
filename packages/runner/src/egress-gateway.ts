// Connects sandboxes that have an egress allowlist to the runner's egress proxy.
//
// For such a sandbox the agent listens on 127.0.0.1:EGRESS_PROXY_PORT inside it (`egress.listen`),
// and the runner keeps `PENDING_ACCEPTS` `egress.accept` calls open on its link: each answers
// when a program connects, its channel becomes a `SandboxTcpStream`, and the stream is handed to
// the proxy tagged with the sandbox and its allowlist. A link that drops (runner restart, agent
// unreachable) ends the pending calls; the loops reach the agent again and go on, until the
// sandbox is gone. The policy is kept in the runner's state, so a restarted runner re-arms it.
import { EGRESS_PROXY_PORT, type NetworkPolicy } from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import type { AgentLink } from './agent-link.ts'
import { EgressAllowlist } from './egress-allowlist.ts'
import type { EgressProxy } from './egress-proxy.ts'
import { RunnerError } from './runner-error.ts'
import type { SandboxManager } from './sandbox-manager.ts'
import { SandboxTcpStream, tcpChannel } from './sandbox-tcp-stream.ts'
import type { StateStore } from './state-store.ts'

/** `egress.accept` calls kept open per sandbox: connections served without waiting on a round trip. */
const PENDING_ACCEPTS = 4
/** Egress connections open at once per sandbox; while at the cap no accept is pending, so new ones wait in the agent's short queue. */
export const MAX_EGRESS_CONNECTIONS = 256
/** Pause before reaching an agent again after its link failed. */
const RETRY_MS = 1_000

/** An allowlist checked at create time, with the environment that points programs at the proxy. */
export interface PreparedEgress {
  /** The policy as given. */
  policy: NetworkPolicy
  /** Its parsed allowlist. */
  allowlist: EgressAllowlist
  /** `HTTP_PROXY` and friends, added to the sandbox's base environment. */
  env: Record<string, string>
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
}

/** Arms and re-arms sandboxes' egress. */
export class EgressGateway {
  readonly #o: EgressGatewayOptions
  readonly #armed = new Set<string>()
  readonly #listening = new WeakSet<AgentLink>()
  readonly #open = new Map<string, number>()
  readonly #slotWaiters = new Map<string, (() => void)[]>()
  #closed = false

  /** A gateway over `options`. */
  constructor(options: EgressGatewayOptions) {
    this.#o = options
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
    return { policy, allowlist, env }
  }

  /** Starts egress for a new sandbox: records its policy, opens the listener, arms the accepts. */
  async start(sandboxId: string, prepared: PreparedEgress): Promise<void> {
    this.#o.store.setMeta(`egress:${sandboxId}`, JSON.stringify(prepared.policy))
    const link = await this.#o.manager.get(sandboxId).link()
    await this.#listen(link)
    this.#arm(sandboxId, prepared.allowlist)
  }

  /** Re-arms every stored sandbox that has a policy (after a runner restart). */
  restore(): void {
    for (const runtime of this.#o.manager.list()) {
      const stored = this.#o.store.getMeta(`egress:${runtime.id}`)
      if (!stored) continue
      const prepared = this.prepare(JSON.parse(stored) as NetworkPolicy)
      if (prepared) this.#arm(runtime.id, prepared.allowlist)
    }
  }

  /** Forgets a destroyed sandbox's policy. */
  forget(sandboxId: string): void {
    this.#o.store.setMeta(`egress:${sandboxId}`, null)
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

  #arm(sandboxId: string, allowlist: EgressAllowlist): void {
    if (this.#armed.has(sandboxId)) return
    this.#armed.add(sandboxId)
    for (let i = 0; i < PENDING_ACCEPTS; i++) void this.#loop(sandboxId, allowlist)
  }

  /** Waits until the sandbox has fewer than MAX_EGRESS_CONNECTIONS open. */
  async #slot(sandboxId: string): Promise<void> {
    while ((this.#open.get(sandboxId) ?? 0) >= MAX_EGRESS_CONNECTIONS) {
      await new Promise<void>((resolve) => {
        const waiters = this.#slotWaiters.get(sandboxId) ?? []
        waiters.push(resolve)
        this.#slotWaiters.set(sandboxId, waiters)
      })
    }
  }

  #opened(sandboxId: string, stream: SandboxTcpStream): void {
    this.#open.set(sandboxId, (this.#open.get(sandboxId) ?? 0) + 1)
    stream.once('close', () => {
      const n = (this.#open.get(sandboxId) ?? 1) - 1
      if (n <= 0) this.#open.delete(sandboxId)
      else this.#open.set(sandboxId, n)
      this.#slotWaiters.get(sandboxId)?.shift()?.()
    })
  }

  async #loop(sandboxId: string, allowlist: EgressAllowlist): Promise<void> {
    while (!this.#closed && this.#armed.has(sandboxId)) {
      await this.#slot(sandboxId)
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
      const stream = new SandboxTcpStream(tcpChannel(link))
      // Until a program connects, a link that drops fails the stream with nobody reading it.
      stream.on('error', () => {})
      try {
        await link.call('egress.accept', { ch: stream.channelId })
      } catch {
        stream.destroy()
        if (link.open) await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref())
        continue
      }
      this.#opened(sandboxId, stream)
      this.#o.proxy.accept(stream, { sandboxId, allowlist })
    }
    this.#armed.delete(sandboxId)
  }
}
