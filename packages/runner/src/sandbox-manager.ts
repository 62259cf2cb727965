// The sandbox manager owns every sandbox's runtime (sandbox-runtime.ts): its stored record, its
// driver and its live agent link. It creates sandboxes through a driver, reconnects to their
// agents after a runner restart, and reconnects when a link drops while the agent lives. What
// happens to idle sandboxes and sessions is in sandbox-lifetimes.ts, hibernation and waking in
// sandbox-hibernation.ts. Agents are never stopped by the runner's own shutdown: they are
// detached.
//
// No sandbox can hold up the runner or another sandbox. A restart checks which agents are gone
// (marked `dead`, with the reason) and then reconnects to the others in the background, each
// attempt with its own deadline (the agent's hello included). An agent that lives but does not
// answer (stopped, wedged, or a socket that accepts and says nothing) makes its sandbox
// `unreachable`, with the reason; API calls on it fail at once with AGENT_UNAVAILABLE, and the
// manager retries with a growing delay until the agent answers (`running` again) or dies.
//
// A create with default options takes a sandbox from the warm pool (warm-pool.ts) when one is
// ready: already started, its link open, its default session's bash running; the pool starts
// sandboxes through this manager's spec and launch and refills itself.
import { freemem } from 'node:os'
import {
  type CreateSandboxRequest,
  DEFAULT_SANDBOX_LIMITS,
  type SandboxInfo,
  type SandboxLimits,
  type SessionInfo,
  type SessionOptions,
  type SnapshotInfo,
  shardedSandboxId,
} from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import type { FastifyBaseLogger as Logger } from 'fastify'
import { AgentLink } from './agent-link.ts'
import { randomId } from './credentials.ts'
import {
  type DriverSandbox,
  linkSecretOf,
  type SandboxDriver,
  type SandboxSpec,
} from './drivers/sandbox-driver.ts'
import { type LifetimeSettings, lifetimeSettings } from './lifetime-settings.ts'
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'
import type { RunnerMetrics } from './runner-metrics.ts'
import { SandboxHibernation } from './sandbox-hibernation.ts'
import { SandboxLifetimes } from './sandbox-lifetimes.ts'
import { REACH_TIMEOUT_MS, SandboxRuntime } from './sandbox-runtime.ts'
import type { SandboxSnapshots } from './sandbox-snapshots.ts'
import { ShellSessionRegistry } from './shell-session-registry.ts'
import type { SnapshotManifest } from './snapshots/snapshot-manifest.ts'
import type { SandboxRecord, StateStore } from './state-store.ts'
import { defaultLimitsOf, type PooledSandbox, WarmPool } from './warm-pool.ts'

/** Deadline for a new sandbox's agent to start and answer. */
const CONNECT_TIMEOUT_MS = 15_000
/** Deadline of a liveness check at startup; a driver that takes longer is left to the reconnect. */
const LIVENESS_TIMEOUT_MS = 250

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
  #closing = false
  #hibernator: SandboxHibernation | null = null
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
    this.pool = new WarmPool({
      size: options.warmPool ?? 0,
      maxSandboxes: options.limits.maxSandboxes,
      drivers: options.drivers,
      store: options.store,
      logger: options.logger,
      metrics: options.metrics,
      availableMemoryBytes: options.availableMemoryBytes ?? freemem,
      hooks: {
        spec: (driver) => this.#spec(defaultLimitsOf(driver), {}),
        launch: (driver, spec, onHandle) => this.#launch(driver, spec, onHandle),
        liveCount: () => this.liveCount(),
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

  /** Counts by status, for metrics. */
  /** Sandboxes that count against `maxSandboxes` (every one not dead). */
  liveCount(): number {
    return [...this.#sandboxes.values()].filter((s) => s.record.status !== 'dead').length
  }

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
    await Promise.all(stored.map((s) => this.#markIfGone(s)))
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
    void this.pool.start(this.#o.defaultDriver)
  }

  /** Marks a sandbox dead when its driver says, within a short deadline, that the agent is gone. */
  async #markIfGone(runtime: SandboxRuntime): Promise<void> {
    const driver = this.#o.drivers.get(runtime.record.driver)
    if (!driver) return
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), LIVENESS_TIMEOUT_MS)
    })
    try {
      const live = await Promise.race([driver.isAlive(this.#handle(runtime.record)), late])
      if (live && !live.alive) this.#markDead(runtime, live.reason ?? 'agent gone')
    } catch {
      // A handle the driver cannot read is reported by the reconnect attempt.
    } finally {
      clearTimeout(timer)
    }
  }

  /** Creates a sandbox and starts its agent; resolves once the agent answered hello. */
  async create(input: CreateSandboxRequest): Promise<SandboxInfo> {
    const fork = this.#snapshots(input.fromSnapshot !== undefined)?.forkRequest(input)
    const { request, manifest } = fork ?? { request: input, manifest: null }
    // A fork's idle settings default to its snapshot's sandbox's (lifetime-settings.ts).
    const lifetimes = lifetimeSettings(
      request,
      this.#o.limits,
      this.#o.snapshots !== undefined,
      fork?.lifetimes,
    )
    const live = this.liveCount()
    if (live >= this.#o.limits.maxSandboxes) {
      throw new RunnerError(
        'TOO_MANY_SANDBOXES',
        `the runner already has ${live} sandboxes (limit ${this.#o.limits.maxSandboxes})`,
        { details: { limit: this.#o.limits.maxSandboxes, value: live } },
      )
    }
    const driverName = request.driver ?? this.#o.defaultDriver
    const driver = this.#o.drivers.get(driverName)
    if (!driver) {
      const allowed = [...this.#o.drivers.keys()]
      throw new RunnerError(
        'BAD_REQUEST',
        `driver "${driverName}" is not allowed on this runner; allowed: ${allowed.join(', ')} (the operator sets them with --drivers)`,
        { details: { allowed } },
      )
    }
    if (request.host !== undefined && driver.takesHost !== true) {
      throw new RunnerError(
        'BAD_REQUEST',
        `the ${driver.name} driver runs sandboxes on this runner's host and takes no "host"; drop it or use the ssh driver`,
      )
    }
    // An isolating driver gives every sandbox the default limits it can enforce here; a driver
    // that isolates nothing enforces nothing, so it gets only what was asked (and refuses that below).
    const defaults = driver.enforceableDefaults?.(DEFAULT_SANDBOX_LIMITS) ?? DEFAULT_SANDBOX_LIMITS
    const limits = driver.isolation === 'none' ? (request.limits ?? {}) : { ...defaults, ...request.limits }
    const unenforceable = driver.limitsProblem(limits)
    if (unenforceable) {
      throw new RunnerError(
        'LIMITS_NOT_ENFORCEABLE',
        `the ${driver.name} driver cannot enforce these limits: ${unenforceable}`,
      )
    }
    // Env is the agent's own at start, so only a request without env can take a pooled sandbox;
    // a fork writes its workspace before its agent starts, so it never takes one either.
    const poolable =
      Object.keys(request.env ?? {}).length === 0 && manifest === null && request.host === undefined
    const pooled = this.pool.take(driver.name, limits, poolable)
    if (pooled) return this.#adoptPooled(pooled, request, lifetimes)
    try {
      await this.pool.makeRoom()
      return await this.#createCold(driver, limits, request, manifest, lifetimes)
    } finally {
      this.pool.poke()
    }
  }

  /** Creates a sandbox from nothing: the driver's create, the agent's start, its hello. */
  async #createCold(
    driver: SandboxDriver,
    limits: SandboxLimits,
    request: CreateSandboxRequest,
    manifest: SnapshotManifest | null,
    lifetimes: LifetimeSettings,
  ): Promise<SandboxInfo> {
    const spec = this.#spec(limits, request.env ?? {}, request.host)
    const { id } = spec
    const handle = await driver.create(spec)
    const record = this.#newRecord(driver, spec, handle, request, lifetimes)
    this.#o.store.putSandbox(record)
    const runtime = new SandboxRuntime(this, record, this.#o.now)
    this.#sandboxes.set(id, runtime)
    if (record.isolation === 'none') {
      this.#o.logger.warn({ sandboxId: id, driver: driver.name }, record.description)
    }
    try {
      // A fork's workspace is written before its agent starts: no sandbox code runs meanwhile.
      if (manifest) await this.#snapshots(true)?.restoreWorkspace(manifest, driver, handle)
      // A live snapshot on its own driver restores its image: processes go on running.
      const live = manifest !== null && this.#snapshots(true)!.restoresLive(manifest, driver)
      const started = live
        ? await this.#snapshots(true)!.withLiveImage(manifest, (dir) =>
            driver.restoreAgent!(handle, spec, dir),
          )
        : await driver.startAgent(handle, spec)
      record.driverState = started.state
      this.#o.store.setDriverState(id, started.state)
      const link = await this.connect(runtime, CONNECT_TIMEOUT_MS)
      if (live) {
        runtime.restoredFrom = await this.#snapshots(true)!.liveRestored(manifest, link)
        for (const s of runtime.restoredFrom.sessions) this.#o.store.addSession(id, s.id, this.#o.now())
      } else if (manifest) {
        const restored = await this.#snapshots(true)!.restoreShells(
          manifest,
          link,
          request.restartProcesses ?? false,
        )
        for (const session of restored.sessions) this.#o.store.addSession(id, session.id, this.#o.now())
        runtime.restoredFrom = restored
      }
    } catch (error) {
      await driver.destroy(this.#handle(record)).catch(() => {})
      this.#sandboxes.delete(id)
      this.#o.store.deleteSandbox(id)
      throw error instanceof RunnerError
        ? error
        : new RunnerError('AGENT_UNAVAILABLE', `could not start the agent of sandbox ${id}`, { cause: error })
    }
    return this.info(runtime)
  }

  /** A new sandbox's spec: a fresh id and link secret. */
  #spec(limits: SandboxLimits, env: Record<string, string>, host?: string): SandboxSpec {
    return {
      id: this.#o.shard ? shardedSandboxId(this.#o.shard, randomId('', 16)) : randomId('sb_', 16),
      env,
      limits,
      scrollbackBytes: this.#o.limits.scrollbackBytes,
      maxSessions: this.#o.limits.maxSessionsPerSandbox,
      linkSecret: mintLinkSecret(),
      ...(host === undefined ? {} : { host }),
    }
  }

  /** Creates a sandbox and starts its agent for the warm pool; the link is open and not yet installed. */
  async #launch(
    driver: SandboxDriver,
    spec: SandboxSpec,
    onHandle: (handle: DriverSandbox) => void,
  ): Promise<{ handle: DriverSandbox; link: AgentLink }> {
    const created = await driver.create(spec)
    onHandle(created)
    const handle = await driver.startAgent(created, spec)
    onHandle(handle)
    const link = await this.#openLink(driver, handle, spec.id, CONNECT_TIMEOUT_MS)
    // The agent starts a spare shell with the default options as it starts (session-manager.ts):
    // the client's first session, `default` or a new one, takes it without waiting for a bash.
    return { handle, link }
  }

  /** The record of a sandbox a driver just made for `request`, not yet started. */
  #newRecord(
    driver: SandboxDriver,
    spec: SandboxSpec,
    handle: DriverSandbox,
    request: CreateSandboxRequest,
    lifetimes: LifetimeSettings,
  ): SandboxRecord {
    return {
      id: spec.id,
      status: 'starting',
      driver: driver.name,
      isolation: handle.isolation ?? driver.isolation,
      description: handle.description ?? driver.description,
      workdir: handle.workdir,
      limits: spec.limits,
      metadata: request.metadata ?? {},
      env: spec.env,
      ...lifetimes,
      createdAt: this.#o.now(),
      deadReason: null,
      driverState: handle.state,
    }
  }

  /** Turns a pooled sandbox into the client's: recorded with the request's runner-side options. */
  async #adoptPooled(
    pooled: PooledSandbox,
    request: CreateSandboxRequest,
    lifetimes: LifetimeSettings,
  ): Promise<SandboxInfo> {
    const { driver, spec, handle, link } = pooled
    const record = this.#newRecord(driver, spec, handle, request, lifetimes)
    this.#o.store.putSandbox(record)
    const runtime = new SandboxRuntime(this, record, this.#o.now)
    this.#sandboxes.set(spec.id, runtime)
    if (driver.isolation === 'none') {
      this.#o.logger.warn({ sandboxId: spec.id, driver: driver.name }, driver.description)
    }
    this.#install(runtime, link)
    this.pool.taken(driver.name)
    return this.info(runtime)
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
        : await driver.usage(this.#handle(r)).catch(() => null)
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

  /** Snapshots a sandbox: every open shell's state, its workspace and its settings. */
  async snapshot(runtime: SandboxRuntime, name: string | null): Promise<SnapshotInfo> {
    const snapshots = this.#snapshots(true)!
    const driver = this.#o.drivers.get(runtime.record.driver)
    const link = await runtime.link()
    if (!driver)
      throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} has no driver on this runner`)
    const handle = this.#handle(runtime.record)
    if (!snapshots.isLive(driver)) return snapshots.take(runtime.record, link, driver, handle, name)
    // Live: requests wait while the sandbox is checkpointed, then restored in place from its image.
    return runtime.hibernating(() =>
      snapshots.take(runtime.record, link, driver, handle, name, {
        suspended: () => runtime.detach(),
        after: async (imageDir) => {
          if (imageDir === null) {
            // A checkpoint that failed in gVisor stopped the sandbox; one refused before it
            // (the agent did not suspend in time) left it running, with its link handed back.
            const alive = await driver.isAlive(handle)
            if (alive.alive) await this.connect(runtime, CONNECT_TIMEOUT_MS)
            else this.#markDead(runtime, `its live snapshot failed and stopped it (${alive.reason})`)
            return
          }
          const spec = this.#specOf(runtime.record, linkSecretOf(handle))
          const started = await driver.restoreAgent!(handle, spec, imageDir)
          runtime.record.driverState = started.state
          this.#o.store.setDriverState(runtime.id, started.state)
          await this.connect(runtime, CONNECT_TIMEOUT_MS)
        },
      }),
    )
  }

  /** The spec a sandbox is started again with (wake, live restore): its settings and `linkSecret`. */
  #specOf(record: SandboxRecord, linkSecret: string): SandboxSpec {
    return {
      id: record.id,
      env: record.env,
      limits: record.limits,
      scrollbackBytes: this.#o.limits.scrollbackBytes,
      maxSessions: this.#o.limits.maxSessionsPerSandbox,
      linkSecret,
    }
  }

  /**
   * Hibernates a sandbox (sandbox-hibernation.ts): snapshotted and stopped, `hibernated` until
   * the next request that needs its agent wakes it. With `abortIf`, asked once the snapshot is
   * taken, a sandbox used meanwhile stays awake.
   */
  async hibernate(runtime: SandboxRuntime, options: { abortIf?: () => boolean } = {}): Promise<SandboxInfo> {
    await this.#hibernation().hibernate(runtime, options)
    return this.info(runtime)
  }

  /** Wakes a hibernated sandbox (sandbox-hibernation.ts); resolves with its new link. */
  wake(runtime: SandboxRuntime): Promise<AgentLink> {
    return this.#hibernation().wake(runtime)
  }

  /** Hibernation, on a runner that keeps snapshots; a runner without refuses with a message. */
  #hibernation(): SandboxHibernation {
    const snapshots = this.#snapshots(true)!
    this.#hibernator ??= new SandboxHibernation({
      snapshots,
      drivers: this.#o.drivers,
      store: this.#o.store,
      logger: this.#o.logger,
      specOf: (record, linkSecret) => this.#specOf(record, linkSecret),
      connect: (runtime) => this.connect(runtime, CONNECT_TIMEOUT_MS),
    })
    return this.#hibernator
  }

  /** The snapshot service; with `required`, a runner without one refuses with a message. */
  #snapshots(required: boolean): SandboxSnapshots | undefined {
    if (this.#o.snapshots === undefined && required) {
      throw new RunnerError(
        'BAD_REQUEST',
        'this runner keeps no snapshots (it was built without a snapshot store); start it with `conch runner`, which keeps them in its state dir.',
      )
    }
    return this.#o.snapshots
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
    if (runtime.record.status === 'hibernated') await this.#snapshots(true)!.dropHibernation(runtime.record)
    else if (driver) await driver.destroy(this.#handle(runtime.record))
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
   * One attempt to reach a sandbox's agent for `reach()`: on failure a sandbox whose agent lives
   * becomes unreachable and is retried later; on success it is running again.
   */
  async reach(runtime: SandboxRuntime, timeoutMs: number): Promise<AgentLink> {
    try {
      const link = await this.connect(runtime, timeoutMs)
      runtime.stopRetrying()
      return link
    } catch (error) {
      if (this.#closing || !this.#sandboxes.has(runtime.id) || runtime.record.status === 'dead') throw error
      const reason = error instanceof RunnerError ? error.message : 'the agent could not be reached'
      this.#markUnreachable(runtime, reason)
      // A driver this runner no longer offers will not come back by retrying.
      if (this.#o.drivers.has(runtime.record.driver)) {
        runtime.retryLater(() => {
          if (this.#closing || !this.#sandboxes.has(runtime.id) || runtime.record.status === 'dead') return
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
    const handle = this.#handle(runtime.record)
    const live = await driver.isAlive(handle)
    if (!live.alive) {
      this.#markDead(runtime, live.reason ?? 'agent gone')
      throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} is dead: ${live.reason}`)
    }
    let link: AgentLink
    try {
      link = await this.#openLink(driver, handle, runtime.id, Math.max(1, deadline - Date.now()))
    } catch (error) {
      // An agent of another link version answers but can never be used: dead, not unreachable.
      if (error instanceof RunnerError && error.code === 'UNSUPPORTED_PROTOCOL_VERSION') {
        this.#markDead(runtime, error.message, 'sandbox agent speaks another link protocol; marked dead')
        throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} is dead (${error.message})`)
      }
      // The agent may have died while we were connecting: then the sandbox is dead, not busy.
      const after = await driver.isAlive(handle)
      if (!after.alive) {
        this.#markDead(runtime, after.reason ?? 'agent gone')
        throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} is dead: ${after.reason}`)
      }
      throw error
    }
    if (this.#closing || this.#sandboxes.get(runtime.id) !== runtime) {
      link.close()
      throw new RunnerError('SANDBOX_NOT_FOUND', `sandbox ${runtime.id} was destroyed while connecting`)
    }
    this.#install(runtime, link)
    return link
  }

  /** Opens a link to a sandbox's agent within `timeoutMs`, its hello included. */
  async #openLink(
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
  #install(runtime: SandboxRuntime, link: AgentLink): void {
    link.on({
      sessionClosed: (frame) => {
        this.#o.logger.info(
          { sandboxId: runtime.id, sessionId: frame.sessionId, reason: frame.reason },
          'shell closed',
        )
        this.#o.store.deleteSession(runtime.id, frame.sessionId)
      },
      close: () => {
        if (runtime.currentLink !== null || this.#closing || !this.#sandboxes.has(runtime.id)) return
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

  /** Closes every link; agents keep running. Pooled sandboxes, never a client's, are destroyed. */
  async close(): Promise<void> {
    this.#closing = true
    await this.lifetimes.stop()
    for (const s of this.#sandboxes.values()) s.detach()
    await this.pool.close()
  }

  #markDead(runtime: SandboxRuntime, reason: string, message = 'sandbox agent is gone; marked dead'): void {
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

  #handle(record: SandboxRecord): DriverSandbox {
    return { id: record.id, workdir: record.workdir, state: record.driverState }
  }
}
