// A sandbox as the runner holds it in memory: its stored record, its agent link (with the
// reconnect backoff), and what keeps it from being idle: runs, attached clients, a keep-alive.
// The manager creates runtimes and does the work they ask for (reach, wake).
import type { AgentLink } from './agent-link.ts'
import type { DriverSandbox } from './drivers/sandbox-driver.ts'
import { RunnerError } from './runner-error.ts'
import type { SandboxManager } from './sandbox-manager.ts'
import type { RestoredFrom } from './sandbox-snapshots.ts'
import type { SandboxRecord } from './state-store.ts'

/** Deadline of one reconnect attempt to an agent that already ran, its hello included. */
export const REACH_TIMEOUT_MS = 5_000
/** First delay before retrying an unreachable agent; it doubles up to the maximum. */
const RETRY_FIRST_MS = 1_000
/** Longest delay between retries of an unreachable agent. */
const RETRY_MAX_MS = 15_000

/** One sandbox as the runner holds it in memory. */
export class SandboxRuntime {
  /** The stored record (kept in sync with the database). */
  record: SandboxRecord
  /** Runs running or queued through this runner. */
  runs = 0
  /** Shell sockets attached. */
  attached = 0
  /** When its idle time started: its last request, or when its last client or run let go. */
  lastActivity: number
  /** Until when a keep-alive holds it awake (ms since the epoch); null when none does. */
  keepAliveUntil: number | null = null
  /** Background processes started with `keepAlive`: process id → until when one may hold it awake. */
  readonly keptProcesses = new Map<string, number>()
  /** Set while the sandbox is being stopped for hibernation. */
  #hibernating: Promise<unknown> | null = null

  /** Whether the sandbox is being stopped for hibernation. */
  get isHibernating(): boolean {
    return this.#hibernating !== null
  }

  /** Runs `stop` (the part of hibernating after the snapshot); requests wait for it. */
  async hibernating<T>(stop: () => Promise<T>): Promise<T> {
    let done: () => void = () => {}
    // Set before `stop` runs: closing the link inside it must already see it.
    this.#hibernating = new Promise<void>((resolve) => {
      done = resolve
    })
    try {
      return await stop()
    } finally {
      this.#hibernating = null
      done()
    }
  }

  /** The snapshot this sandbox was forked from, and how the restore went. */
  restoredFrom: RestoredFrom | null = null
  #link: AgentLink | null = null
  #connecting: Promise<AgentLink> | null = null
  #retryTimer: NodeJS.Timeout | undefined
  #retryDelayMs = RETRY_FIRST_MS
  readonly #manager: SandboxManager
  readonly #now: () => number

  /** Created by the manager; `now` is the runner's clock. */
  constructor(manager: SandboxManager, record: SandboxRecord, now: () => number) {
    this.#manager = manager
    this.#now = now
    this.record = record
    this.lastActivity = now()
  }

  /** Marks it used now: its idle time starts again. */
  touch(): void {
    this.lastActivity = this.#now()
  }

  /**
   * Holds it awake while a client stays attached (a shell, a terminal, a port relay, an output
   * follower); returns the release, which may be called more than once.
   */
  hold(): () => void {
    this.attached += 1
    let released = false
    return () => {
      if (released) return
      released = true
      this.attached -= 1
      this.touch()
    }
  }

  /** Sandbox id. */
  get id(): string {
    return this.record.id
  }

  /** The driver's handle on it. */
  get handle(): DriverSandbox {
    const { id, workdir, driverState } = this.record
    return { id, workdir, state: driverState }
  }

  /** The current link, if one is open. */
  get currentLink(): AgentLink | null {
    return this.#link?.open ? this.#link : null
  }

  /**
   * The agent link. Waits for a reconnect in progress; fails at once with SANDBOX_NOT_RUNNING
   * when the sandbox is dead and with AGENT_UNAVAILABLE while it is unreachable.
   */
  async link(): Promise<AgentLink> {
    // A request that arrives while the sandbox goes to sleep waits, then wakes it.
    if (this.#hibernating !== null) await this.#hibernating.catch(() => {})
    if (this.#link?.open) return this.#link
    const { status, deadReason } = this.record
    if (status === 'dead') {
      throw new RunnerError(
        'SANDBOX_NOT_RUNNING',
        `sandbox ${this.id} is dead (${deadReason ?? 'agent gone'})`,
      )
    }
    if (status === 'hibernated') {
      this.#connecting ??= this.#manager.wake(this).finally(() => {
        this.#connecting = null
      })
      return this.#connecting
    }
    if (status === 'unreachable') {
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        `sandbox ${this.id} is unreachable: its agent is alive but does not answer (${deadReason ?? 'no answer'}); the runner keeps retrying, so try again later or destroy the sandbox`,
        { details: { status, reason: deadReason } },
      )
    }
    return this.reach(REACH_TIMEOUT_MS)
  }

  /** One attempt to reach the agent, shared by every caller while it runs. */
  reach(timeoutMs: number): Promise<AgentLink> {
    this.#connecting ??= this.#manager.reach(this, timeoutMs).finally(() => {
      this.#connecting = null
    })
    return this.#connecting
  }

  /** Runs `attempt` after the current backoff delay (unless one is already due); doubles the delay. */
  retryLater(attempt: () => void): void {
    if (this.#retryTimer) return
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined
      attempt()
    }, this.#retryDelayMs)
    this.#retryTimer.unref()
    this.#retryDelayMs = Math.min(this.#retryDelayMs * 2, RETRY_MAX_MS)
  }

  /** Cancels a pending retry and resets the backoff. */
  stopRetrying(): void {
    clearTimeout(this.#retryTimer)
    this.#retryTimer = undefined
    this.#retryDelayMs = RETRY_FIRST_MS
  }

  /** Installs a fresh link. */
  adopt(link: AgentLink): void {
    this.#link = link
  }

  /** Closes the link and cancels retries without touching the agent. */
  detach(): void {
    this.stopRetrying()
    const link = this.#link
    this.#link = null
    link?.close()
  }

  /** Counts a run against the per-sandbox queue limit; returns the release function. */
  acquireRun(limit: number): () => void {
    this.reserveRun(limit)
    let released = false
    return () => {
      if (released) return
      released = true
      this.releaseRun()
    }
  }

  /**
   * Counts a run against the per-sandbox queue limit (RATE_LIMITED at `limit`). The caller
   * calls `releaseRun` exactly once for it; `acquireRun` wraps the pair for callers that
   * cannot keep that count themselves (a shell socket's run table keeps it, without a closure
   * per run).
   */
  reserveRun(limit: number): void {
    if (this.runs >= limit) {
      throw new RunnerError(
        'RATE_LIMITED',
        `sandbox ${this.id} already has ${this.runs} runs running or queued (limit ${limit})`,
        { details: { limit, value: this.runs } },
      )
    }
    this.runs += 1
  }

  /** Ends a run counted by `reserveRun`. */
  releaseRun(): void {
    this.runs -= 1
    this.touch()
  }
}
