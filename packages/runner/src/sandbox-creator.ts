// How a sandbox comes to be. A create request is checked against the runner (the sandbox limit,
// the drivers it allows, the limits the driver can enforce), then served one of two ways: a
// request with default options takes a sandbox from the warm pool (warm-pool.ts), already started
// with its link open, and only records it as the client's; any other request (env, a fork, an
// ssh host) is created cold: the driver's create, a fork's workspace written before the agent
// starts, the agent's start (or a live image's restore), its hello, a fork's shells restored.
// A cold create that fails destroys what the driver made and forgets the record, so no half
// sandbox stays behind. The warm pool starts its sandboxes through `spec` and `launch` here.
// It lives apart from the manager (sandbox-manager.ts) because creating is its largest concept.
import {
  type CreateSandboxRequest,
  DEFAULT_SANDBOX_LIMITS,
  type SandboxInfo,
  type SandboxLimits,
  shardedSandboxId,
} from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import type { FastifyBaseLogger as Logger } from 'fastify'
import { type AgentConnector, CONNECT_TIMEOUT_MS } from './agent-connector.ts'
import type { AgentLink } from './agent-link.ts'
import { randomId } from './credentials.ts'
import type { DriverSandbox, SandboxDriver, SandboxSpec } from './drivers/sandbox-driver.ts'
import { type LifetimeSettings, lifetimeSettings } from './lifetime-settings.ts'
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'
import type { SandboxRuntime } from './sandbox-runtime.ts'
import type { SnapshotAccess } from './snapshot-access.ts'
import type { SnapshotManifest } from './snapshots/snapshot-manifest.ts'
import type { SandboxRecord, StateStore } from './state-store.ts'
import type { PooledSandbox, WarmPool } from './warm-pool.ts'

/** What the creator asks of the sandbox manager. */
export interface SandboxCreatorHooks {
  /** A runtime for a new record, owned by the manager. */
  newRuntime: (record: SandboxRecord) => SandboxRuntime
  /** Sandboxes that count against `maxSandboxes`. */
  liveCount: () => number
  /** The public view of a sandbox. */
  info: (runtime: SandboxRuntime) => Promise<SandboxInfo>
}

/** What the creator needs. */
export interface SandboxCreatorOptions {
  /** The manager's sandboxes by id; a new sandbox is added, a failed one removed. */
  sandboxes: Map<string, SandboxRuntime>
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
  /** Clock. */
  now: () => number
  /** The runner's shard name, written into every new sandbox id; null keeps plain ids. */
  shard: string | null | undefined
  /** Sandboxes started ahead of demand. */
  pool: WarmPool
  /** Opens and installs agent links. */
  connector: AgentConnector
  /** The snapshot service, for forks. */
  snapshots: SnapshotAccess
  /** What the manager provides. */
  hooks: SandboxCreatorHooks
}

/** Checks create requests and creates sandboxes, cold or from the warm pool. */
export class SandboxCreator {
  readonly #o: SandboxCreatorOptions

  /** Binds the creator to the manager's sandboxes, the runner's drivers and its warm pool. */
  constructor(options: SandboxCreatorOptions) {
    this.#o = options
  }

  /** Creates a sandbox and starts its agent; resolves once the agent answered hello. */
  async create(input: CreateSandboxRequest): Promise<SandboxInfo> {
    const snapshots = this.#o.snapshots
    const fork = snapshots.service(input.fromSnapshot !== undefined)?.forkRequest(input)
    const { request, manifest } = fork ?? { request: input, manifest: null }
    // A fork's idle settings default to its snapshot's sandbox's (lifetime-settings.ts).
    const lifetimes = lifetimeSettings(request, this.#o.limits, snapshots.available, fork?.lifetimes)
    const live = this.#o.hooks.liveCount()
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
    const pooled = this.#o.pool.take(driver.name, limits, poolable)
    if (pooled) return this.#adoptPooled(pooled, request, lifetimes)
    try {
      await this.#o.pool.makeRoom()
      return await this.#createCold(driver, limits, request, manifest, lifetimes)
    } finally {
      this.#o.pool.poke()
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
    const { store, logger, now, connector, snapshots } = this.#o
    const spec = this.spec(limits, request.env ?? {}, request.host)
    const { id } = spec
    const handle = await driver.create(spec)
    const record = this.#newRecord(driver, spec, handle, request, lifetimes)
    store.putSandbox(record)
    const runtime = this.#o.hooks.newRuntime(record)
    this.#o.sandboxes.set(id, runtime)
    if (record.isolation === 'none') {
      logger.warn({ sandboxId: id, driver: driver.name }, record.description)
    }
    try {
      // A fork's workspace is written before its agent starts: no sandbox code runs meanwhile.
      if (manifest) await snapshots.service(true)?.restoreWorkspace(manifest, driver, handle)
      // A live snapshot on its own driver restores its image: processes go on running.
      const live = manifest !== null && snapshots.service(true)!.restoresLive(manifest, driver)
      const started = live
        ? await snapshots
            .service(true)!
            .withLiveImage(manifest, (dir) => driver.restoreAgent!(handle, spec, dir))
        : await driver.startAgent(handle, spec)
      record.driverState = started.state
      store.setDriverState(id, started.state)
      const link = await connector.connect(runtime, CONNECT_TIMEOUT_MS)
      if (live) {
        runtime.restoredFrom = await snapshots.service(true)!.liveRestored(manifest, link)
        for (const s of runtime.restoredFrom.sessions) store.addSession(id, s.id, now())
      } else if (manifest) {
        const restored = await snapshots
          .service(true)!
          .restoreShells(manifest, link, request.restartProcesses ?? false)
        for (const session of restored.sessions) store.addSession(id, session.id, now())
        runtime.restoredFrom = restored
      }
    } catch (error) {
      await driver.destroy(runtime.handle).catch(() => {})
      this.#o.sandboxes.delete(id)
      store.deleteSandbox(id)
      throw error instanceof RunnerError
        ? error
        : new RunnerError('AGENT_UNAVAILABLE', `could not start the agent of sandbox ${id}`, { cause: error })
    }
    return this.#o.hooks.info(runtime)
  }

  /** A new sandbox's spec: a fresh id and link secret. */
  spec(limits: SandboxLimits, env: Record<string, string>, host?: string): SandboxSpec {
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
  async launch(
    driver: SandboxDriver,
    spec: SandboxSpec,
    onHandle: (handle: DriverSandbox) => void,
  ): Promise<{ handle: DriverSandbox; link: AgentLink }> {
    const created = await driver.create(spec)
    onHandle(created)
    const handle = await driver.startAgent(created, spec)
    onHandle(handle)
    const link = await this.#o.connector.openLink(driver, handle, spec.id, CONNECT_TIMEOUT_MS)
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
    const runtime = this.#o.hooks.newRuntime(record)
    this.#o.sandboxes.set(spec.id, runtime)
    if (driver.isolation === 'none') {
      this.#o.logger.warn({ sandboxId: spec.id, driver: driver.name }, driver.description)
    }
    this.#o.connector.install(runtime, link)
    this.#o.pool.taken(driver.name)
    return this.#o.hooks.info(runtime)
  }
}
