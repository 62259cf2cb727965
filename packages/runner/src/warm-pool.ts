// The warm pool: sandboxes started ahead of demand, so a create request that one satisfies is
// answered at once instead of after the agent's start (a Node process, its bundle, the
// driver's namespaces and cgroups). Per driver, the pool keeps up to `size` sandboxes with the
// default options (the driver's default limits, no env): a request with those options (metadata
// and idle timeout are runner-side and applied on take) takes one; any other is a miss and is
// created cold. The default driver's pool fills at start; another driver's fills after its
// first request.
//
// Before a pooled sandbox is offered, its agent is warmed up (pool-warm-up.ts): runs through the
// link in a session of its own, deleted afterwards, so a client's first commands on it run at
// the agent's warm speed. A sandbox is ready only once that is done, so a take never waits for it.
//
// Safety: a pooled sandbox was never given to a client, so it carries nobody's state. `take` is
// synchronous, so two concurrent requests never get the same one, and a taken sandbox leaves
// the pool for good (destroying it never returns it). Each has its own id and link secret,
// minted when it was started; tokens are minted per sandbox on request, never ahead. Pooled
// sandboxes do not count as the clients' sandboxes (`liveCount`, `/readyz` load), but they do
// count against `maxSandboxes` on the host: the pool fills only while clients' sandboxes plus
// pooled ones stay below it, and gives one back when a cold create needs its room; it fills
// only while the host has at least a pooled sandbox's memory limit available. Their handles are
// recorded in the state store, so a runner that dies with a full pool destroys those sandboxes
// at its next start; a runner that stops destroys them itself.
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits } from '@conch/protocol'
import type { FastifyBaseLogger as Logger } from 'fastify'
import type { AgentLink } from './agent-link.ts'
import type { DriverSandbox, SandboxDriver, SandboxSpec } from './drivers/sandbox-driver.ts'
import { PoolRecord, type RecordedHandle } from './pool-record.ts'
import { POOL_WARM_UP_RUNS, warmUpAgent } from './pool-warm-up.ts'
import type { RunnerMetrics } from './runner-metrics.ts'
import type { StateStore } from './state-store.ts'

/** Memory a pooled sandbox without a memory limit is assumed to need (its agent's share). */
const MIN_MEMORY_BYTES = 256 * 1024 * 1024
/** First delay after a failed fill; it doubles up to the maximum. */
const RETRY_FIRST_MS = 1_000
/** Longest delay between fill attempts after failures. */
const RETRY_MAX_MS = 60_000
/** Delay between a take and the refill that replaces it. */
const REFILL_AFTER_TAKE_MS = 250
/** Delay before checking again when the host lacks memory or room. */
const RECHECK_MS = 5_000

/** A sandbox started for the pool, with its agent answering on an open link. */
export interface PooledSandbox {
  /** The driver that made it. */
  driver: SandboxDriver
  /** The spec it was started with (fresh id and link secret, default options). */
  spec: SandboxSpec
  /** The driver's handle, agent started. */
  handle: DriverSandbox
  /** The open link to its agent (hello answered). */
  link: AgentLink
}

/** What the pool needs of the sandbox manager. */
export interface WarmPoolHooks {
  /** The spec of a sandbox made with default options on `driver`: a fresh id and link secret. */
  spec(driver: SandboxDriver): SandboxSpec
  /** Creates the sandbox, starts its agent and opens its link; `onHandle` records each new handle. */
  launch(
    driver: SandboxDriver,
    spec: SandboxSpec,
    onHandle: (handle: DriverSandbox) => void,
  ): Promise<{ handle: DriverSandbox; link: AgentLink }>
  /** Clients' sandboxes alive now (every one not dead). */
  liveCount(): number
}

/** What the pool is built from. */
export interface WarmPoolOptions {
  /** Sandboxes kept ready per driver; 0 disables the pool. */
  size: number
  /** The runner's `maxSandboxes`, which pooled sandboxes count against. */
  maxSandboxes: number
  /** Drivers by name. */
  drivers: ReadonlyMap<string, SandboxDriver>
  /** Where pooled sandboxes' handles are recorded. */
  store: StateStore
  /** Logger. */
  logger: Logger
  /** Hit and miss counters. */
  metrics: RunnerMetrics
  /** Memory the host has available now, in bytes. */
  availableMemoryBytes: () => number
  /** The manager's side. */
  hooks: WarmPoolHooks
  /** Warm-up runs of each pooled sandbox's agent before it is offered (default `POOL_WARM_UP_RUNS`; 0: none). */
  warmUpRuns?: number
}

/** One driver's part of the pool. */
interface DriverPool {
  driver: SandboxDriver
  ready: PooledSandbox[]
  filling: number
  timer: NodeJS.Timeout | undefined
  retryMs: number
}

/** Two limit sets are equal when they name the same values (absent and undefined alike). */
function sameLimits(a: SandboxLimits, b: SandboxLimits): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof SandboxLimits>
  for (const key of keys) if (a[key] !== b[key]) return false
  return true
}

/** Pre-started sandboxes per driver, taken by create requests with default options. */
export class WarmPool {
  readonly #o: WarmPoolOptions
  readonly #pools = new Map<string, DriverPool>()
  readonly #record: PoolRecord
  readonly #fills = new Set<Promise<void>>()
  #closing = false
  #warmUpRuns = 0
  /** Creates waiting in `makeRoom` for a fill to end. */
  #roomWanted = 0

  /** Creates the pool; nothing starts until `start`. */
  constructor(options: WarmPoolOptions) {
    this.#o = options
    this.#record = new PoolRecord(options.store)
  }

  /** Whether the pool is on (size above 0). */
  get enabled(): boolean {
    return this.#o.size > 0
  }

  /** Sandboxes ready or being started, across drivers. */
  get total(): number {
    let n = 0
    for (const p of this.#pools.values()) n += p.ready.length + p.filling
    return n
  }

  /** Warm-up runs ended so far, across the sandboxes this pool started (pool-warm-up.ts). */
  get warmUpRuns(): number {
    return this.#warmUpRuns
  }

  /** Ready sandboxes per driver, for metrics. */
  readyByDriver(): Record<string, number> {
    return Object.fromEntries([...this.#pools].map(([name, p]) => [name, p.ready.length]))
  }

  /** The ids of the ready sandboxes (tests check that none is ever handed out twice). */
  readyIds(): string[] {
    return [...this.#pools.values()].flatMap((p) => p.ready.map((s) => s.spec.id))
  }

  /**
   * Destroys the sandboxes a previous run left in its pool (it died before it could), then
   * starts filling `defaultDriver`'s pool in the background.
   */
  async start(defaultDriver: string): Promise<void> {
    await this.#reapOrphans()
    const pool = this.enabled ? this.#activate(defaultDriver) : null
    if (pool) this.#refill(pool)
  }

  /**
   * A ready sandbox of `driverName` started with `limits`, removed from the pool for good; null
   * (a miss) when there is none or the request is not `poolable` (it gives env). Counts the hit
   * or miss; the caller `poke`s once the sandbox it creates counts as the client's, and the pool
   * refills then.
   */
  take(driverName: string, limits: SandboxLimits, poolable: boolean): PooledSandbox | null {
    if (!this.enabled || this.#closing) return null
    const pool = this.#activate(driverName)
    if (pool && poolable) {
      const at = pool.ready.findIndex((s) => s.link.open && sameLimits(s.spec.limits, limits))
      if (at !== -1) {
        const [taken] = pool.ready.splice(at, 1)
        if (taken) {
          this.#record.forget(taken.spec.id)
          this.#o.metrics.warmPoolHits.inc({ driver: driverName })
          return taken
        }
      }
    }
    this.#o.metrics.warmPoolMisses.inc({ driver: driverName })
    return null
  }

  /**
   * Makes room for one more client sandbox: when clients' sandboxes plus pooled ones would pass
   * `maxSandboxes`, a ready pooled sandbox is destroyed.
   */
  async makeRoom(): Promise<void> {
    while (this.#o.hooks.liveCount() + 1 + this.total > this.#o.maxSandboxes) {
      const pool = [...this.#pools.values()].find((p) => p.ready.length > 0)
      const victim = pool?.ready.pop()
      if (victim) await this.#discard(victim)
      else if (this.#fills.size > 0) {
        // A fill's warm-up stops at its next run, so the create does not wait for all of it.
        this.#roomWanted += 1
        await Promise.race([...this.#fills]).finally(() => {
          this.#roomWanted -= 1
        })
      } else return
    }
  }

  /** The number of client sandboxes changed: refill where there is room. */
  poke(): void {
    for (const pool of this.#pools.values()) this.#refill(pool)
  }

  /**
   * A pooled sandbox was just taken: refill after `REFILL_AFTER_TAKE_MS`, so starting its
   * replacement (a disk, namespaces, a Node process) does not compete with the client's first
   * requests on the sandbox it took.
   */
  taken(driverName: string): void {
    const pool = this.#pools.get(driverName)
    if (pool) this.#later(pool, REFILL_AFTER_TAKE_MS)
  }

  /** Stops filling and destroys every pooled sandbox, waiting for fills under way. */
  async close(): Promise<void> {
    this.#closing = true
    for (const pool of this.#pools.values()) clearTimeout(pool.timer)
    await Promise.all([...this.#fills])
    const ready = [...this.#pools.values()].flatMap((p) => p.ready.splice(0))
    await Promise.all(ready.map((s) => this.#discard(s)))
  }

  #activate(driverName: string): DriverPool | null {
    let pool = this.#pools.get(driverName)
    if (!pool) {
      const driver = this.#o.drivers.get(driverName)
      if (!driver) return null
      pool = { driver, ready: [], filling: 0, timer: undefined, retryMs: RETRY_FIRST_MS }
      this.#pools.set(driverName, pool)
    }
    return pool
  }

  #later(pool: DriverPool, ms: number): void {
    if (pool.timer || this.#closing) return
    pool.timer = setTimeout(() => {
      pool.timer = undefined
      this.#refill(pool)
    }, ms)
    pool.timer.unref()
  }

  /** Starts one fill when the pool is short, there is room under `maxSandboxes`, and memory. */
  #refill(pool: DriverPool): void {
    // A create waiting for room (`makeRoom`) gets it before the pool starts another.
    if (this.#closing || this.#roomWanted > 0 || pool.timer || pool.filling > 0) return
    if (pool.ready.length >= this.#o.size) return
    if (this.#o.hooks.liveCount() + this.total >= this.#o.maxSandboxes) return
    const spec = this.#o.hooks.spec(pool.driver)
    const need = spec.limits.memoryBytes ?? MIN_MEMORY_BYTES
    if (this.#o.availableMemoryBytes() < need) {
      this.#o.logger.debug(
        { driver: pool.driver.name, needBytes: need },
        'warm pool not refilled: the host lacks the memory',
      )
      this.#later(pool, RECHECK_MS)
      return
    }
    pool.filling += 1
    const fill = this.#fill(pool, spec).finally(() => {
      pool.filling -= 1
      this.#fills.delete(fill)
      this.#refill(pool)
    })
    this.#fills.add(fill)
  }

  async #fill(pool: DriverPool, spec: SandboxSpec): Promise<void> {
    const { driver } = pool
    let last: DriverSandbox | null = null
    let opened: AgentLink | null = null
    try {
      const { handle, link } = await this.#o.hooks.launch(driver, spec, (h) => {
        last = h
        this.#record.add(spec.id, driver.name, h)
      })
      opened = link
      const sandbox: PooledSandbox = { driver, spec, handle, link }
      await warmUpAgent(link, {
        runs: this.#o.warmUpRuns ?? POOL_WARM_UP_RUNS,
        stop: () => this.#closing || this.#roomWanted > 0,
        onRun: () => {
          this.#warmUpRuns += 1
        },
      })
      const overfull = this.#o.hooks.liveCount() + this.total > this.#o.maxSandboxes
      if (this.#closing || overfull || this.#roomWanted > 0) {
        await this.#discard(sandbox)
        return
      }
      link.on({
        close: () => {
          const at = pool.ready.indexOf(sandbox)
          if (at === -1) return
          pool.ready.splice(at, 1)
          this.#o.logger.warn({ sandboxId: spec.id }, 'pooled sandbox lost its agent; replacing it')
          void this.#discard(sandbox).finally(() => this.#refill(pool))
        },
      })
      pool.ready.push(sandbox)
      pool.retryMs = RETRY_FIRST_MS
    } catch (error) {
      this.#o.logger.warn(
        { err: error, driver: driver.name, retryInMs: pool.retryMs },
        'warm pool could not start a sandbox',
      )
      opened?.close()
      if (last !== null) await driver.destroy(last).catch(() => {})
      this.#record.forget(spec.id)
      this.#later(pool, pool.retryMs)
      pool.retryMs = Math.min(pool.retryMs * 2, RETRY_MAX_MS)
    }
  }

  async #discard(sandbox: PooledSandbox): Promise<void> {
    sandbox.link.close()
    try {
      await sandbox.driver.destroy(sandbox.handle)
    } catch (error) {
      this.#o.logger.warn({ err: error, sandboxId: sandbox.spec.id }, 'could not destroy a pooled sandbox')
    }
    this.#record.forget(sandbox.spec.id)
  }

  /** The ids of the pooled sandboxes a previous run recorded (its orphans, which `start` destroys). */
  recordedIds(): string[] {
    return this.#record.previous().map((entry) => entry.handle.id)
  }

  /** Destroys what a previous run recorded; a driver no longer allowed leaves its entry (logged). */
  async #reapOrphans(): Promise<void> {
    const entries = this.#record.previous()
    if (entries.length === 0) return
    const kept: RecordedHandle[] = []
    await Promise.all(
      entries.map(async (entry) => {
        const driver = this.#o.drivers.get(entry.driver)
        if (!driver) {
          kept.push(entry)
          this.#o.logger.warn(
            { sandboxId: entry.handle.id, driver: entry.driver },
            'a pooled sandbox of a previous run needs a driver this runner does not allow; left in place',
          )
          return
        }
        await driver.destroy(entry.handle).catch((error: unknown) => {
          this.#o.logger.warn(
            { err: error, sandboxId: entry.handle.id },
            'could not destroy an orphan pooled sandbox',
          )
        })
        this.#o.logger.info(
          { sandboxId: entry.handle.id },
          'destroyed a pooled sandbox left by a previous run',
        )
      }),
    )
    this.#record.keep(kept)
  }
}

/** The limits a pooled sandbox of `driver` gets: what a create request naming none gets. */
export function defaultLimitsOf(driver: SandboxDriver): SandboxLimits {
  if (driver.isolation === 'none') return {}
  return driver.enforceableDefaults?.(DEFAULT_SANDBOX_LIMITS) ?? DEFAULT_SANDBOX_LIMITS
}
