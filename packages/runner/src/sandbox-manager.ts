// The sandbox manager owns every sandbox's runtime (sandbox-runtime.ts): its stored record, its
// driver and its live agent link. It is the one object the routes and plugins hold: it lists
// and finds sandboxes, reconnects to their agents after a runner restart, records their
// sessions, and destroys them. Agents are never stopped by the runner's own shutdown: they are
// detached. Its concepts have files of their own, which it assembles:
// - sandbox-creator.ts: checking a create request, creating cold or adopting from the warm pool
//   (warm-pool.ts), which starts its sandboxes through the creator;
// - agent-connector.ts: opening and installing agent links, reconnecting when a link drops
//   while the agent lives, and the `dead` / `unreachable` statuses they decide;
// - snapshot-access.ts: snapshots of a sandbox, hibernation (sandbox-hibernation.ts), and the
//   refusal on a runner without a snapshot store;
// - sandbox-lifetimes.ts: what happens to idle sandboxes and sessions.
//
// No sandbox can hold up the runner or another sandbox. A restart checks which agents are gone
// (marked `dead`, with the reason) and then reconnects to the others in the background, each
// attempt with its own deadline (the agent's hello included). An agent that lives but does not
// answer (stopped, wedged, or a socket that accepts and says nothing) makes its sandbox
// `unreachable`, with the reason; API calls on it fail at once with AGENT_UNAVAILABLE, and the
// manager retries with a growing delay until the agent answers (`running` again) or dies.
import { freemem } from 'node:os'
import type {
  CreateSandboxRequest,
  SandboxInfo,
  SessionInfo,
  SessionOptions,
  SnapshotInfo,
} from '@conch/protocol'
import type { FastifyBaseLogger as Logger } from 'fastify'
import { AgentConnector } from './agent-connector.ts'
import type { AgentLink } from './agent-link.ts'
import type { SandboxDriver } from './drivers/sandbox-driver.ts'
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'
import type { RunnerMetrics } from './runner-metrics.ts'
import { SandboxCreator } from './sandbox-creator.ts'
import { SandboxLifetimes } from './sandbox-lifetimes.ts'
import { REACH_TIMEOUT_MS, SandboxRuntime } from './sandbox-runtime.ts'
import type { SandboxSnapshots } from './sandbox-snapshots.ts'
import { ShellSessionRegistry } from './shell-session-registry.ts'
import { SnapshotAccess } from './snapshot-access.ts'
import type { StateStore } from './state-store.ts'
import { defaultLimitsOf, WarmPool } from './warm-pool.ts'

export { SandboxRuntime }

/** What the manager needs. */
export interface SandboxManagerOptions {
  /** Durable state. */
  store: StateStore
  /** Drivers by name. */
  drivers: ReadonlyMap<string, SandboxDriver>
  /** Driver used when a request names none. */
  defaultDriver: string
  /** Limits. */
  limits: RunnerLimits
  /** Logger. */
  logger: Logger
  /** Metrics. */
  metrics: RunnerMetrics
  /** Clock. */
  now: () => number
  /** The runner's shard name, written into every new sandbox id; null keeps plain ids. */
  shard?: string | null
  /** Snapshots and forks; a runner without them refuses `fromSnapshot`. */
  snapshots?: SandboxSnapshots
  /** Sandboxes kept started ahead of demand per driver (warm-pool.ts); 0 or absent disables the pool. */
  warmPool?: number
  /** Memory the host has available now; the pool fills only while it covers a pooled sandbox. */
  availableMemoryBytes?: () => number
}

/** Creates, tracks, reconnects and destroys sandboxes. */
export class SandboxManager {
  readonly #o: SandboxManagerOptions
  readonly #sandboxes = new Map<string, SandboxRuntime>()
  readonly #destroyListeners = new Set<(sandboxId: string) => void>()
  readonly #connector: AgentConnector
  readonly #snapshots: SnapshotAccess
  readonly #creator: SandboxCreator
  #ready = false
  /** Idle hibernation and deletion, idle sessions, keep-alives (sandbox-lifetimes.ts). */
  readonly lifetimes: SandboxLifetimes
  /** Socket counts and run ids per session, shared by the runner's shell sockets. */
  readonly shellSessions = new ShellSessionRegistry()
  /** Sandboxes started ahead of demand. */
  readonly pool: WarmPool

  /** Loads every stored sandbox; call `restore()` to reconnect to their agents. */
  constructor(options: SandboxManagerOptions) {
    this.#o = options
    this.#connector = new AgentConnector({
      sandboxes: this.#sandboxes,
      drivers: options.drivers,
      store: options.store,
      limits: options.limits,
      logger: options.logger,
      metrics: options.metrics,
    })
    this.#snapshots = new SnapshotAccess({
      snapshots: options.snapshots,
      drivers: options.drivers,
      store: options.store,
      limits: options.limits,
      logger: options.logger,
      connector: this.#connector,
    })
    this.pool = new WarmPool({
      size: options.warmPool ?? 0,
      maxSandboxes: options.limits.maxSandboxes,
      drivers: options.drivers,
      store: options.store,
      logger: options.logger,
      metrics: options.metrics,
      availableMemoryBytes: options.availableMemoryBytes ?? freemem,
      hooks: {
        spec: (driver) => this.#creator.spec(defaultLimitsOf(driver), {}),
        launch: (driver, spec, onHandle) => this.#creator.launch(driver, spec, onHandle),
        liveCount: () => this.liveCount(),
      },
    })
    this.#creator = new SandboxCreator({
      sandboxes: this.#sandboxes,
      store: options.store,
      drivers: options.drivers,
      defaultDriver: options.defaultDriver,
      limits: options.limits,
      logger: options.logger,
      now: options.now,
      shard: options.shard,
      pool: this.pool,
      connector: this.#connector,
      snapshots: this.#snapshots,
      hooks: {
        newRuntime: (record) => new SandboxRuntime(this, record, options.now),
        liveCount: () => this.liveCount(),
        info: (runtime) => this.info(runtime),
      },
    })
    for (const record of options.store.listSandboxes()) {
      this.#sandboxes.set(record.id, new SandboxRuntime(this, record, options.now))
    }
    this.lifetimes = new SandboxLifetimes({
      host: this,
      store: options.store,
      sockets: (sandboxId, sessionId) => this.shellSessions.sockets(sandboxId, sessionId),
      limits: options.limits,
      canHibernate: options.snapshots !== undefined,
      logger: options.logger,
      now: options.now,
    })
    this.lifetimes.start()
  }

  /** True once every stored sandbox had its first reconnect attempt. */
  get ready(): boolean {
    return this.#ready
  }

  /** Sandboxes that count against `maxSandboxes` (every one not dead). */
  liveCount(): number {
    return [...this.#sandboxes.values()].filter((s) => s.record.status !== 'dead').length
  }

  /** Counts by status, for metrics. */
  countByStatus(): Record<string, number> {
    const out: Record<string, number> = { starting: 0, running: 0, unreachable: 0, dead: 0 }
    for (const s of this.#sandboxes.values()) out[s.record.status] = (out[s.record.status] ?? 0) + 1
    return out
  }

  /**
   * Marks the stored sandboxes whose agent is gone as dead, then reconnects to the others in the
   * background and returns: startup never waits on an agent. `ready` turns true once every
   * first attempt settled; the unreachable keep being retried.
   */
  async restore(): Promise<void> {
    const stored = [...this.#sandboxes.values()].filter(
      (s) => s.record.status !== 'dead' && s.record.status !== 'hibernated',
    )
    await Promise.all(stored.map((s) => this.#connector.markIfGone(s)))
    const attempts = stored
      .filter((s) => s.record.status !== 'dead')
      .map((s) =>
        s.reach(REACH_TIMEOUT_MS).then(
          () => this.#o.logger.info({ sandboxId: s.id }, 'reconnected to a running agent'),
          () => {},
        ),
      )
    void Promise.all(attempts).then(() => {
      this.#ready = true
    })
    await this.#reapUnrecorded()
    void this.pool.start(this.#o.defaultDriver)
  }

  /**
   * Destroys what a runner killed inside a create left behind (unrecorded-sandboxes.ts): before
   * the pool starts and before the first request, so no create of this runner is under way.
   */
  async #reapUnrecorded(): Promise<void> {
    const known = new Set([...this.#sandboxes.keys(), ...this.pool.recordedIds()])
    for (const driver of this.#o.drivers.values()) {
      if (!driver.reapUnrecorded) continue
      try {
        const reaped = await driver.reapUnrecorded(known)
        if (reaped.length > 0)
          this.#o.logger.warn(
            { driver: driver.name, sandboxIds: reaped },
            'destroyed sandboxes a previous run created but never recorded (it was killed while creating them)',
          )
      } catch (error) {
        this.#o.logger.warn(
          { err: error, driver: driver.name },
          'could not destroy the sandboxes a previous run left unrecorded',
        )
      }
    }
  }

  /** Creates a sandbox and starts its agent (sandbox-creator.ts); resolves once the agent answered hello. */
  create(input: CreateSandboxRequest): Promise<SandboxInfo> {
    return this.#creator.create(input)
  }

  /** A sandbox runtime; SANDBOX_NOT_FOUND when unknown. */
  get(id: string): SandboxRuntime {
    const runtime = this.#sandboxes.get(id)
    if (!runtime) throw new RunnerError('SANDBOX_NOT_FOUND', `sandbox ${id} does not exist`)
    runtime.lastActivity = this.#o.now()
    return runtime
  }

  /** Every sandbox. */
  list(): SandboxRuntime[] {
    return [...this.#sandboxes.values()]
  }

  /** The public view of a sandbox. */
  async info(runtime: SandboxRuntime): Promise<SandboxInfo> {
    const r = runtime.record
    const driver = this.#o.drivers.get(r.driver)
    const usage =
      r.status === 'dead' || r.status === 'hibernated' || driver?.usage === undefined
        ? null
        : await driver.usage(runtime.handle).catch(() => null)
    return {
      id: r.id,
      status: r.status,
      driver: r.driver,
      isolation: r.isolation,
      description: r.description,
      workdir: r.workdir,
      limits: r.limits,
      metadata: r.metadata,
      createdAt: r.createdAt,
      deadReason: r.deadReason,
      idleTimeoutMs: r.idleTimeoutMs,
      hibernateAfterMs: r.hibernateAfterMs,
      sessionIdleTimeoutMs: r.sessionIdleTimeoutMs,
      lastActivityAt: runtime.lastActivity,
      keepAliveUntil: runtime.keepAliveUntil,
      ...(runtime.restoredFrom === null ? {} : { restoredFrom: runtime.restoredFrom }),
      usage,
    }
  }

  /** Snapshots a sandbox (snapshot-access.ts): every open shell's state, its workspace and its settings. */
  snapshot(runtime: SandboxRuntime, name: string | null): Promise<SnapshotInfo> {
    return this.#snapshots.snapshot(runtime, name)
  }

  /**
   * Hibernates a sandbox (sandbox-hibernation.ts): snapshotted and stopped, `hibernated` until
   * the next request that needs its agent wakes it. With `abortIf`, asked once the snapshot is
   * taken, a sandbox used meanwhile stays awake.
   */
  async hibernate(runtime: SandboxRuntime, options: { abortIf?: () => boolean } = {}): Promise<SandboxInfo> {
    await this.#snapshots.hibernation().hibernate(runtime, options)
    return this.info(runtime)
  }

  /** Wakes a hibernated sandbox (sandbox-hibernation.ts); resolves with its new link. */
  wake(runtime: SandboxRuntime): Promise<AgentLink> {
    return this.#snapshots.hibernation().wake(runtime)
  }

  /** Stops the agent, deletes the workspace and forgets the sandbox with its sessions and tokens. */
  async destroy(id: string): Promise<void> {
    const runtime = this.get(id)
    this.#sandboxes.delete(id)
    runtime.detach()
    const driver = this.#o.drivers.get(runtime.record.driver)
    this.#o.store.deleteSandbox(id)
    this.#o.snapshots?.store.forgetSandbox(id)
    this.lifetimes.sessions.forget(id)
    if (runtime.record.status === 'hibernated')
      await this.#snapshots.service(true)!.dropHibernation(runtime.record)
    else if (driver) await driver.destroy(runtime.handle)
    this.#o.logger.info({ sandboxId: id }, 'sandbox destroyed')
    for (const listener of this.#destroyListeners) listener(id)
    this.pool.poke()
  }

  /** Calls `listener` with the id of every sandbox destroyed from now on, however it went. */
  onDestroyed(listener: (sandboxId: string) => void): void {
    this.#destroyListeners.add(listener)
  }

  /** Creates a session in the agent after checking the per-sandbox limit, and records it. */
  async createSession(runtime: SandboxRuntime, options: SessionOptions): Promise<SessionInfo> {
    this.checkSessionLimit(runtime)
    const link = await runtime.link()
    const info = await link.call('session.create', options)
    this.#o.store.addSession(runtime.id, info.id, this.#o.now())
    this.lifetimes.sessions.touch(runtime.id, info.id, this.#o.now())
    return info
  }

  /** Records a session the agent made on demand (the default session). */
  noteSession(runtime: SandboxRuntime, sessionId: string): void {
    this.#o.store.addSession(runtime.id, sessionId, this.#o.now())
  }

  /** TOO_MANY_SESSIONS when the sandbox is at its session limit. */
  checkSessionLimit(runtime: SandboxRuntime): void {
    const n = this.#o.store.countSessions(runtime.id)
    if (n >= this.#o.limits.maxSessionsPerSandbox) {
      throw new RunnerError(
        'TOO_MANY_SESSIONS',
        `sandbox ${runtime.id} already has ${n} sessions (limit ${this.#o.limits.maxSessionsPerSandbox})`,
        { details: { limit: this.#o.limits.maxSessionsPerSandbox, value: n } },
      )
    }
  }

  /** Forgets a session. */
  forgetSession(runtime: SandboxRuntime, sessionId: string): void {
    this.#o.store.deleteSession(runtime.id, sessionId)
  }

  /**
   * One attempt to reach a sandbox's agent for `reach()` (agent-connector.ts): on failure a
   * sandbox whose agent lives becomes unreachable and is retried later; on success it is running again.
   */
  reach(runtime: SandboxRuntime, timeoutMs: number): Promise<AgentLink> {
    return this.#connector.reach(runtime, timeoutMs)
  }

  /** Connects (or reconnects) a runtime to its agent within `timeoutMs`, the agent's hello included. */
  connect(runtime: SandboxRuntime, timeoutMs: number): Promise<AgentLink> {
    return this.#connector.connect(runtime, timeoutMs)
  }

  /** Closes every link; agents keep running. Pooled sandboxes, never a client's, are destroyed. */
  async close(): Promise<void> {
    this.#connector.close()
    await this.lifetimes.stop()
    for (const s of this.#sandboxes.values()) s.detach()
    await this.pool.close()
  }
}
