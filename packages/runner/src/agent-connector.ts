// The links between the runner and its sandboxes' agents, and the statuses they decide. A link
// is opened through the sandbox's driver within one deadline (the agent's hello included) and
// installed on the runtime: the agent's closed shells leave the state store, and a link lost
// while the agent lives is reconnected. An agent that is gone makes its sandbox `dead`; one that
// lives but does not answer makes it `unreachable` and is retried with a growing delay
// (sandbox-runtime.ts) until it answers (`running` again) or dies. It lives apart from the
// manager (sandbox-manager.ts) because every path that starts or restarts an agent (create, the
// warm pool, a restart's restore, wake, live snapshots) goes through it.
import type { FastifyBaseLogger as Logger } from 'fastify'
import { AgentLink } from './agent-link.ts'
import { type DriverSandbox, linkSecretOf, type SandboxDriver } from './drivers/sandbox-driver.ts'
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'
import type { RunnerMetrics } from './runner-metrics.ts'
import { REACH_TIMEOUT_MS, type SandboxRuntime } from './sandbox-runtime.ts'
import type { StateStore } from './state-store.ts'

/** Deadline for a new (or freshly restarted) sandbox's agent to start and answer. */
export const CONNECT_TIMEOUT_MS = 15_000
/** Deadline of a liveness check at startup; a driver that takes longer is left to the reconnect. */
const LIVENESS_TIMEOUT_MS = 250

/** What the connector needs. */
export interface AgentConnectorOptions {
  /** The manager's sandboxes by id: a runtime no longer in it is not connected or retried. */
  sandboxes: ReadonlyMap<string, SandboxRuntime>
  /** Drivers by name. */
  drivers: ReadonlyMap<string, SandboxDriver>
  /** Durable state. */
  store: StateStore
  /** Limits (`heartbeatIntervalMs`). */
  limits: Pick<RunnerLimits, 'heartbeatIntervalMs'>
  /** Logger. */
  logger: Logger
  /** Metrics (`bytesStreamed`). */
  metrics: RunnerMetrics
}

/** Opens, installs and retries the links to sandboxes' agents; marks sandboxes dead or unreachable. */
export class AgentConnector {
  readonly #o: AgentConnectorOptions
  #closing = false

  /** Binds the connector to the manager's sandboxes and the runner's drivers. */
  constructor(options: AgentConnectorOptions) {
    this.#o = options
  }

  /** From now on no link is installed and no sandbox retried: the runner is shutting down. */
  close(): void {
    this.#closing = true
  }

  /** Marks a sandbox dead when its driver says, within a short deadline, that the agent is gone. */
  async markIfGone(runtime: SandboxRuntime): Promise<void> {
    const driver = this.#o.drivers.get(runtime.record.driver)
    if (!driver) return
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), LIVENESS_TIMEOUT_MS)
    })
    try {
      const live = await Promise.race([driver.isAlive(runtime.handle), late])
      if (live && !live.alive) this.markDead(runtime, live.reason ?? 'agent gone')
    } catch {
      // A handle the driver cannot read is reported by the reconnect attempt.
    } finally {
      clearTimeout(timer)
    }
  }

  /**
   * One attempt to reach a sandbox's agent for `reach()`: on failure a sandbox whose agent lives
   * becomes unreachable and is retried later; on success it is running again.
   */
  async reach(runtime: SandboxRuntime, timeoutMs: number): Promise<AgentLink> {
    try {
      const link = await this.connect(runtime, timeoutMs)
      runtime.stopRetrying()
      return link
    } catch (error) {
      if (this.#closing || !this.#o.sandboxes.has(runtime.id) || runtime.record.status === 'dead') throw error
      const reason = error instanceof RunnerError ? error.message : 'the agent could not be reached'
      this.#markUnreachable(runtime, reason)
      // A driver this runner no longer offers will not come back by retrying.
      if (this.#o.drivers.has(runtime.record.driver)) {
        runtime.retryLater(() => {
          if (this.#closing || !this.#o.sandboxes.has(runtime.id) || runtime.record.status === 'dead') return
          runtime.reach(REACH_TIMEOUT_MS).then(
            () => this.#o.logger.info({ sandboxId: runtime.id }, 'agent answers again; sandbox running'),
            () => {},
          )
        })
      }
      throw error
    }
  }

  /** Connects (or reconnects) a runtime to its agent within `timeoutMs`, the agent's hello included. */
  async connect(runtime: SandboxRuntime, timeoutMs: number): Promise<AgentLink> {
    const deadline = Date.now() + timeoutMs
    const driver = this.#o.drivers.get(runtime.record.driver)
    if (!driver) {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `sandbox ${runtime.id} was made by the ${runtime.record.driver} driver, which this runner does not allow (--drivers ${[...this.#o.drivers.keys()].join(',')}); restart the runner with it allowed, or destroy the sandbox`,
      )
    }
    const handle = runtime.handle
    const live = await driver.isAlive(handle)
    if (!live.alive) {
      this.markDead(runtime, live.reason ?? 'agent gone')
      throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} is dead: ${live.reason}`)
    }
    let link: AgentLink
    try {
      link = await this.openLink(driver, handle, runtime.id, Math.max(1, deadline - Date.now()))
    } catch (error) {
      // An agent of another link version answers but can never be used: dead, not unreachable.
      if (error instanceof RunnerError && error.code === 'UNSUPPORTED_PROTOCOL_VERSION') {
        this.markDead(runtime, error.message, 'sandbox agent speaks another link protocol; marked dead')
        throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} is dead (${error.message})`)
      }
      // The agent may have died while we were connecting: then the sandbox is dead, not busy.
      const after = await driver.isAlive(handle)
      if (!after.alive) {
        this.markDead(runtime, after.reason ?? 'agent gone')
        throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} is dead: ${after.reason}`)
      }
      throw error
    }
    if (this.#closing || this.#o.sandboxes.get(runtime.id) !== runtime) {
      link.close()
      throw new RunnerError('SANDBOX_NOT_FOUND', `sandbox ${runtime.id} was destroyed while connecting`)
    }
    this.install(runtime, link)
    return link
  }

  /** Opens a link to a sandbox's agent within `timeoutMs`, its hello included; installs nothing. */
  async openLink(
    driver: SandboxDriver,
    handle: DriverSandbox,
    sandboxId: string,
    timeoutMs: number,
  ): Promise<AgentLink> {
    const deadline = Date.now() + timeoutMs
    const stream = await driver.connect(handle, timeoutMs)
    return AgentLink.open(stream, {
      secret: linkSecretOf(handle),
      logger: this.#o.logger.child({ sandboxId }),
      heartbeatIntervalMs: this.#o.limits.heartbeatIntervalMs,
      helloTimeoutMs: Math.max(1, deadline - Date.now()),
      onBytes: (n) => this.#o.metrics.bytesStreamed.inc(n),
    })
  }

  /** Makes `link` the runtime's link: session bookkeeping, reconnect on loss, status running. */
  install(runtime: SandboxRuntime, link: AgentLink): void {
    link.on({
      sessionClosed: (frame) => {
        this.#o.logger.info(
          { sandboxId: runtime.id, sessionId: frame.sessionId, reason: frame.reason },
          'shell closed',
        )
        this.#o.store.deleteSession(runtime.id, frame.sessionId)
      },
      close: () => {
        if (runtime.currentLink !== null || this.#closing || !this.#o.sandboxes.has(runtime.id)) return
        if (runtime.record.status === 'dead' || runtime.record.status === 'hibernated') return
        if (runtime.isHibernating) return
        this.#o.logger.warn({ sandboxId: runtime.id }, 'agent link lost; reconnecting')
        runtime.link().catch(() => {})
      },
    })
    runtime.adopt(link)
    if (runtime.record.status !== 'running') {
      runtime.record.status = 'running'
      runtime.record.deadReason = null
      this.#o.store.setSandboxStatus(runtime.id, 'running')
    }
  }

  /** Marks a sandbox dead with `reason`: its link closed, its retries cancelled, the store told. */
  markDead(runtime: SandboxRuntime, reason: string, message = 'sandbox agent is gone; marked dead'): void {
    runtime.record.status = 'dead'
    runtime.record.deadReason = reason
    runtime.detach()
    this.#o.store.setSandboxStatus(runtime.id, 'dead', reason)
    this.#o.logger.warn({ sandboxId: runtime.id, reason }, message)
  }

  #markUnreachable(runtime: SandboxRuntime, reason: string): void {
    const { record } = runtime
    if (record.status === 'unreachable' && record.deadReason === reason) return
    record.status = 'unreachable'
    record.deadReason = reason
    this.#o.store.setSandboxStatus(runtime.id, 'unreachable', reason)
    this.#o.logger.warn(
      { sandboxId: runtime.id, reason },
      'sandbox agent does not answer; marked unreachable, retrying',
    )
  }
}
