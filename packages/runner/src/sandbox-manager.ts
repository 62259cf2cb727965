// The sandbox manager owns every sandbox's runtime: its stored record, its driver and its live
// agent link. It creates sandboxes through a driver, reconnects to their agents after a runner
// restart (marking the ones whose agent died as `dead`, with the reason), reconnects when a link
// drops while the agent lives, counts runs per sandbox for the queue limit, and destroys idle
// sandboxes. Agents are never stopped by the runner's own shutdown: they are detached.
import {
  type CreateSandboxRequest,
  DEFAULT_SANDBOX_LIMITS,
  type SandboxInfo,
  type SessionInfo,
  type SessionOptions,
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
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'
import type { RunnerMetrics } from './runner-metrics.ts'
import type { SandboxRecord, StateStore } from './state-store.ts'

const CONNECT_TIMEOUT_MS = 15_000
const RECONNECT_WAIT_MS = 5_000

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
}

/** One sandbox as the runner holds it in memory. */
export class SandboxRuntime {
  /** The stored record (kept in sync with the database). */
  record: SandboxRecord
  /** Runs running or queued through this runner. */
  runs = 0
  /** Shell sockets attached. */
  attached = 0
  /** Last API activity. */
  lastActivity: number
  #link: AgentLink | null = null
  #connecting: Promise<AgentLink> | null = null
  readonly #manager: SandboxManager

  /** Created by the manager. */
  constructor(manager: SandboxManager, record: SandboxRecord, now: number) {
    this.#manager = manager
    this.record = record
    this.lastActivity = now
  }

  /** Sandbox id. */
  get id(): string {
    return this.record.id
  }

  /** The current link, if one is open. */
  get currentLink(): AgentLink | null {
    return this.#link?.open ? this.#link : null
  }

  /** The agent link; waits for a reconnect in progress, fails when the sandbox is dead. */
  async link(): Promise<AgentLink> {
    if (this.#link?.open) return this.#link
    if (this.record.status === 'dead') {
      throw new RunnerError(
        'SANDBOX_NOT_RUNNING',
        `sandbox ${this.id} is dead (${this.record.deadReason ?? 'agent gone'}); create a new sandbox`,
      )
    }
    this.#connecting ??= this.#manager.connect(this, RECONNECT_WAIT_MS).finally(() => {
      this.#connecting = null
    })
    return this.#connecting
  }

  /** Installs a fresh link. */
  adopt(link: AgentLink): void {
    this.#link = link
  }

  /** Closes the link without touching the agent. */
  detach(): void {
    const link = this.#link
    this.#link = null
    link?.close()
  }

  /** Counts a run against the per-sandbox queue limit; returns the release function. */
  acquireRun(limit: number): () => void {
    if (this.runs >= limit) {
      throw new RunnerError(
        'RATE_LIMITED',
        `sandbox ${this.id} already has ${this.runs} runs running or queued (limit ${limit}); wait for some to finish`,
      )
    }
    this.runs += 1
    let released = false
    return () => {
      if (released) return
      released = true
      this.runs -= 1
    }
  }
}

/** Creates, tracks, reconnects and destroys sandboxes. */
export class SandboxManager {
  readonly #o: SandboxManagerOptions
  readonly #sandboxes = new Map<string, SandboxRuntime>()
  #closing = false
  #ready = false
  #idleTimer: NodeJS.Timeout | undefined

  /** Loads every stored sandbox; call `restore()` to reconnect to their agents. */
  constructor(options: SandboxManagerOptions) {
    this.#o = options
    for (const record of options.store.listSandboxes()) {
      this.#sandboxes.set(record.id, new SandboxRuntime(this, record, options.now()))
    }
    this.#idleTimer = setInterval(() => void this.#reapIdle(), 1_000)
    this.#idleTimer.unref()
  }

  /** True once `restore()` finished. */
  get ready(): boolean {
    return this.#ready
  }

  /** Counts by status, for metrics. */
  countByStatus(): Record<string, number> {
    const out: Record<string, number> = { starting: 0, running: 0, dead: 0 }
    for (const s of this.#sandboxes.values()) out[s.record.status] = (out[s.record.status] ?? 0) + 1
    return out
  }

  /** Reconnects to every stored sandbox whose agent is alive; marks the others dead. */
  async restore(): Promise<void> {
    await Promise.all(
      [...this.#sandboxes.values()]
        .filter((s) => s.record.status !== 'dead')
        .map(async (s) => {
          try {
            await this.connect(s, CONNECT_TIMEOUT_MS)
            this.#o.logger.info({ sandboxId: s.id }, 'reconnected to a running agent')
          } catch (error) {
            const reason = error instanceof RunnerError ? error.message : 'agent unreachable'
            this.#markDead(s, reason)
          }
        }),
    )
    this.#ready = true
  }

  /** Creates a sandbox and starts its agent; resolves once the agent answered hello. */
  async create(request: CreateSandboxRequest): Promise<SandboxInfo> {
    const live = [...this.#sandboxes.values()].filter((s) => s.record.status !== 'dead').length
    if (live >= this.#o.limits.maxSandboxes) {
      throw new RunnerError(
        'TOO_MANY_SANDBOXES',
        `the runner already has ${live} sandboxes (limit ${this.#o.limits.maxSandboxes}); destroy one first`,
      )
    }
    const driverName = request.driver ?? this.#o.defaultDriver
    const driver = this.#o.drivers.get(driverName)
    if (!driver) {
      throw new RunnerError(
        'BAD_REQUEST',
        `unknown driver "${driverName}"; this runner has: ${[...this.#o.drivers.keys()].join(', ')}`,
      )
    }
    // An isolating driver gives every sandbox the default limits; a driver that isolates
    // nothing enforces nothing, so it gets only what was asked (and refuses that below).
    const limits =
      driver.isolation === 'none' ? (request.limits ?? {}) : { ...DEFAULT_SANDBOX_LIMITS, ...request.limits }
    const unenforceable = driver.limitsProblem(limits)
    if (unenforceable) {
      throw new RunnerError(
        'BAD_REQUEST',
        `the ${driver.name} driver cannot enforce these limits: ${unenforceable}`,
      )
    }
    const id = randomId('sb_', 16)
    const spec: SandboxSpec = {
      id,
      env: request.env ?? {},
      limits,
      scrollbackBytes: this.#o.limits.scrollbackBytes,
      maxSessions: this.#o.limits.maxSessionsPerSandbox,
      linkSecret: mintLinkSecret(),
    }
    const handle = await driver.create(spec)
    const record: SandboxRecord = {
      id,
      status: 'starting',
      driver: driver.name,
      isolation: driver.isolation,
      description: driver.description,
      workdir: handle.workdir,
      limits: spec.limits,
      metadata: request.metadata ?? {},
      env: spec.env,
      idleTimeoutMs: request.idleTimeoutMs ?? null,
      createdAt: this.#o.now(),
      deadReason: null,
      driverState: handle.state,
    }
    this.#o.store.putSandbox(record)
    const runtime = new SandboxRuntime(this, record, this.#o.now())
    this.#sandboxes.set(id, runtime)
    if (driver.isolation === 'none') {
      this.#o.logger.warn({ sandboxId: id, driver: driver.name }, driver.description)
    }
    try {
      const started = await driver.startAgent(handle, spec)
      record.driverState = started.state
      this.#o.store.setDriverState(id, started.state)
      await this.connect(runtime, CONNECT_TIMEOUT_MS)
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

  /** A sandbox runtime; SANDBOX_NOT_FOUND when unknown. */
  get(id: string): SandboxRuntime {
    const runtime = this.#sandboxes.get(id)
    if (!runtime)
      throw new RunnerError('SANDBOX_NOT_FOUND', `sandbox ${id} does not exist; list sandboxes to see ids`)
    runtime.lastActivity = this.#o.now()
    return runtime
  }

  /** Every sandbox. */
  list(): SandboxRuntime[] {
    return [...this.#sandboxes.values()]
  }

  /** The public view of a sandbox. */
  info(runtime: SandboxRuntime): SandboxInfo {
    const r = runtime.record
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
    }
  }

  /** Stops the agent, deletes the workspace and forgets the sandbox with its sessions and tokens. */
  async destroy(id: string): Promise<void> {
    const runtime = this.get(id)
    this.#sandboxes.delete(id)
    runtime.detach()
    const driver = this.#o.drivers.get(runtime.record.driver)
    this.#o.store.deleteSandbox(id)
    if (driver) await driver.destroy(this.#handle(runtime.record))
    this.#o.logger.info({ sandboxId: id }, 'sandbox destroyed')
  }

  /** Creates a session in the agent after checking the per-sandbox limit, and records it. */
  async createSession(runtime: SandboxRuntime, options: SessionOptions): Promise<SessionInfo> {
    this.checkSessionLimit(runtime)
    const link = await runtime.link()
    const info = await link.call('session.create', options)
    this.#o.store.addSession(runtime.id, info.id, this.#o.now())
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
        `sandbox ${runtime.id} already has ${n} sessions (limit ${this.#o.limits.maxSessionsPerSandbox}); delete one first`,
      )
    }
  }

  /** Forgets a session. */
  forgetSession(runtime: SandboxRuntime, sessionId: string): void {
    this.#o.store.deleteSession(runtime.id, sessionId)
  }

  /** Connects (or reconnects) a runtime to its agent. */
  async connect(runtime: SandboxRuntime, timeoutMs: number): Promise<AgentLink> {
    const driver = this.#o.drivers.get(runtime.record.driver)
    if (!driver)
      throw new RunnerError('AGENT_UNAVAILABLE', `driver "${runtime.record.driver}" is not configured`)
    const handle = this.#handle(runtime.record)
    const live = await driver.isAlive(handle)
    if (!live.alive) {
      this.#markDead(runtime, live.reason ?? 'agent gone')
      throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} is dead: ${live.reason}`)
    }
    let link: AgentLink
    try {
      const stream = await driver.connect(handle, timeoutMs)
      link = await AgentLink.open(stream, {
        secret: linkSecretOf(handle),
        logger: this.#o.logger.child({ sandboxId: runtime.id }),
        heartbeatIntervalMs: this.#o.limits.heartbeatIntervalMs,
        onBytes: (n) => this.#o.metrics.bytesStreamed.inc(n),
      })
    } catch (error) {
      // The agent may have died while we were connecting: then the sandbox is dead, not busy.
      const after = await driver.isAlive(handle)
      if (!after.alive) {
        this.#markDead(runtime, after.reason ?? 'agent gone')
        throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} is dead: ${after.reason}`)
      }
      throw error
    }
    link.on({
      sessionClosed: (frame) => {
        this.#o.logger.info(
          { sandboxId: runtime.id, sessionId: frame.session, reason: frame.reason },
          'shell closed',
        )
        this.#o.store.deleteSession(runtime.id, frame.session)
      },
      close: () => {
        if (runtime.currentLink !== null || this.#closing || !this.#sandboxes.has(runtime.id)) return
        if (runtime.record.status === 'dead') return
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
    return link
  }

  /** Closes every link; agents keep running. */
  close(): void {
    this.#closing = true
    clearInterval(this.#idleTimer)
    for (const s of this.#sandboxes.values()) s.detach()
  }

  #markDead(runtime: SandboxRuntime, reason: string): void {
    runtime.record.status = 'dead'
    runtime.record.deadReason = reason
    runtime.detach()
    this.#o.store.setSandboxStatus(runtime.id, 'dead', reason)
    this.#o.logger.warn({ sandboxId: runtime.id, reason }, 'sandbox agent is gone; marked dead')
  }

  #handle(record: SandboxRecord): DriverSandbox {
    return { id: record.id, workdir: record.workdir, state: record.driverState }
  }

  async #reapIdle(): Promise<void> {
    const now = this.#o.now()
    for (const s of [...this.#sandboxes.values()]) {
      const idle = s.record.idleTimeoutMs
      if (idle === null || s.attached > 0 || s.runs > 0) continue
      if (now - s.lastActivity < idle) continue
      this.#o.logger.info({ sandboxId: s.id, idleTimeoutMs: idle }, 'destroying idle sandbox')
      await this.destroy(s.id).catch((error) =>
        this.#o.logger.error({ err: error, sandboxId: s.id }, 'idle destroy failed'),
      )
    }
  }
}
