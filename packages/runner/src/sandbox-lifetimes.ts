// Idle lifetimes: what happens to a sandbox nobody uses. A sandbox is idle while no run is
// running or queued through the runner, no client is attached (shell and terminal sockets, port
// relays, process output followers), no keep-alive holds it, no process started with
// `keepAlive` runs and no command runs in any of its sessions; its idle time starts at its last request or when its last client, run or keep-alive
// let go. Idle for `hibernateAfterMs`, it is snapshotted and stopped (the next request wakes it);
// idle for `idleTimeoutMs`, it is deleted, hibernated or not. Its idle sessions are deleted by
// `IdleSessions`. One sweep runs at a time, every second, on the runner's clock.
import type { FastifyBaseLogger as Logger } from 'fastify'
import type { AgentLink } from './agent-link.ts'
import { AGENT_CALL_TIMEOUT_MS, IdleSessions } from './idle-sessions.ts'
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'
import type { SandboxRuntime } from './sandbox-runtime.ts'
import type { StateStore } from './state-store.ts'

/** Interval between sweeps (real time; idleness is measured on the runner's clock). */
const SWEEP_INTERVAL_MS = 1_000
/** Background processes started with `keepAlive` that one sandbox may have at once. */
export const MAX_KEPT_PROCESSES = 16

/** What the lifetimes act on: the sandbox manager. */
export interface LifetimeHost {
  /** Every sandbox. */
  list(): SandboxRuntime[]
  /** Deletes a sandbox. */
  destroy(id: string): Promise<void>
  /** Hibernates a sandbox unless `abortIf` says, after its snapshot, that it is in use again. */
  hibernate(runtime: SandboxRuntime, options: { abortIf: () => boolean }): Promise<unknown>
}

/** What the lifetimes need. */
export interface SandboxLifetimesOptions {
  /** The sandbox manager. */
  host: LifetimeHost
  /** Durable state. */
  store: StateStore
  /** Shell sockets open on a session. */
  sockets: (sandboxId: string, sessionId: string) => number
  /** Limits (`maxKeepAliveMs`). */
  limits: Pick<RunnerLimits, 'maxKeepAliveMs'>
  /** Whether sandboxes can hibernate (the runner keeps snapshots). */
  canHibernate: boolean
  /** Logger. */
  logger: Logger
  /** Clock. */
  now: () => number
}

/** Sweeps idle sandboxes and sessions, and holds sandboxes awake on request. */
export class SandboxLifetimes {
  readonly #o: SandboxLifetimesOptions
  /** Idle sessions of every sandbox. */
  readonly sessions: IdleSessions
  #timer: NodeJS.Timeout | undefined
  #sweeping: Promise<void> = Promise.resolve()
  #stopped = false

  /** Does nothing until `start`. */
  constructor(options: SandboxLifetimesOptions) {
    this.#o = options
    this.sessions = new IdleSessions({
      store: options.store,
      sockets: options.sockets,
      logger: options.logger,
    })
  }

  /** Sweeps every second until `stop`. */
  start(): void {
    this.#timer = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS)
    this.#timer.unref()
  }

  /** Stops sweeping; a sweep under way finishes. */
  stop(): Promise<void> {
    this.#stopped = true
    clearInterval(this.#timer)
    return this.#sweeping
  }

  /**
   * Holds a sandbox awake for `durationMs` from now, lowered to `maxKeepAliveMs`; it replaces
   * the previous hold (so calls never add up past the cap) and 0 ends it. Returns the end.
   */
  keepAlive(runtime: SandboxRuntime, durationMs: number): number | null {
    const now = this.#o.now()
    const ms = Math.min(durationMs, this.#o.limits.maxKeepAliveMs)
    runtime.keepAliveUntil = ms === 0 ? null : now + ms
    runtime.touch()
    return runtime.keepAliveUntil
  }

  /**
   * RATE_LIMITED when the sandbox already has `MAX_KEPT_PROCESSES` processes started with
   * `keepAlive` that may still hold it; call before starting another.
   */
  checkKeptProcesses(runtime: SandboxRuntime): void {
    const now = this.#o.now()
    for (const [id, until] of runtime.keptProcesses) if (until <= now) runtime.keptProcesses.delete(id)
    if (runtime.keptProcesses.size >= MAX_KEPT_PROCESSES) {
      throw new RunnerError(
        'RATE_LIMITED',
        `sandbox ${runtime.id} already has ${runtime.keptProcesses.size} processes started with keepAlive (limit ${MAX_KEPT_PROCESSES}); kill one, or start this one without keepAlive`,
        { details: { limit: MAX_KEPT_PROCESSES, value: runtime.keptProcesses.size } },
      )
    }
  }

  /** Holds the sandbox awake while process `processId` runs, for at most `maxKeepAliveMs`. */
  keepProcess(runtime: SandboxRuntime, processId: string): void {
    runtime.keptProcesses.set(processId, this.#o.now() + this.#o.limits.maxKeepAliveMs)
    runtime.touch()
  }

  /** Whether a process started with `keepAlive` still runs (and may still hold the sandbox). */
  async #processHolds(runtime: SandboxRuntime, link: AgentLink | null, now: number): Promise<boolean> {
    const kept = runtime.keptProcesses
    for (const [id, until] of kept) if (until <= now) kept.delete(id)
    if (kept.size === 0 || link === null) return false
    const { processes } = await link.call('process.list', {}, { timeoutMs: AGENT_CALL_TIMEOUT_MS })
    const running = new Set(processes.filter((p) => p.status === 'running').map((p) => p.id))
    for (const id of kept.keys()) if (!running.has(id)) kept.delete(id)
    return kept.size > 0
  }

  /** Whether something holds the sandbox awake at `now`. */
  #held(runtime: SandboxRuntime, now: number): boolean {
    if (runtime.keepAliveUntil !== null && runtime.keepAliveUntil <= now) {
      runtime.keepAliveUntil = null
      runtime.touch()
    }
    return runtime.runs > 0 || runtime.attached > 0 || runtime.keepAliveUntil !== null
  }

  /** One pass over every sandbox; waits for a pass under way first, so passes never overlap. */
  sweep(): Promise<void> {
    this.#sweeping = this.#sweeping.then(() => this.#pass())
    return this.#sweeping
  }

  async #pass(): Promise<void> {
    for (const runtime of this.#o.host.list()) {
      if (this.#stopped) return
      try {
        await this.#sweepOne(runtime)
      } catch (error) {
        // The idle time starts again, so a failing step is retried one idle period later.
        runtime.touch()
        this.#o.logger.warn({ err: error, sandboxId: runtime.id }, 'idle sweep of a sandbox failed')
      }
    }
  }

  async #sweepOne(runtime: SandboxRuntime): Promise<void> {
    const now = this.#o.now()
    const { record } = runtime
    if (this.#held(runtime, now)) {
      runtime.lastActivity = now
      return
    }
    const link = runtime.currentLink
    if (await this.#processHolds(runtime, link, now)) {
      runtime.lastActivity = now
      return
    }
    const idle = now - runtime.lastActivity
    const dueToDelete = record.idleTimeoutMs !== null && idle >= record.idleTimeoutMs
    const dueToHibernate =
      this.#o.canHibernate && record.hibernateAfterMs !== null && idle >= record.hibernateAfterMs
    if ((dueToDelete || dueToHibernate) && link !== null && (await this.#commandRuns(link))) {
      // A command a client left running keeps its sandbox awake.
      runtime.touch()
      return
    }
    if (dueToDelete) {
      this.#o.logger.info(
        { sandboxId: runtime.id, idleTimeoutMs: record.idleTimeoutMs },
        'deleting idle sandbox',
      )
      this.sessions.forget(runtime.id)
      await this.#o.host.destroy(runtime.id)
      return
    }
    if (record.status !== 'running' || link === null || runtime.isHibernating) return
    if (dueToHibernate) {
      await this.#hibernate(runtime)
      return
    }
    await this.sessions.sweep(runtime, link, now)
  }

  /** Whether a command runs or waits in any of the sandbox's sessions. */
  async #commandRuns(link: AgentLink): Promise<boolean> {
    const { sessions } = await link.call('session.list', {}, { timeoutMs: AGENT_CALL_TIMEOUT_MS })
    return sessions.some((s) => s.running !== null || s.queued > 0)
  }

  /** Hibernates an idle sandbox unless it was used meanwhile. */
  async #hibernate(runtime: SandboxRuntime): Promise<void> {
    const since = runtime.lastActivity
    const used = (): boolean => runtime.lastActivity !== since || this.#held(runtime, this.#o.now())
    if (used()) return
    this.#o.logger.info(
      { sandboxId: runtime.id, hibernateAfterMs: runtime.record.hibernateAfterMs },
      'hibernating idle sandbox',
    )
    await this.#o.host.hibernate(runtime, { abortIf: used })
  }
}
