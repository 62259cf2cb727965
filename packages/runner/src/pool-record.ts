// The warm pool's durable record: the handle of every pooled sandbox, kept in the state store
// while it is the pool's, so a runner killed with a full pool lets the next one destroy them (a
// pooled sandbox belongs to no client and no stored sandbox names it).
import type { DriverSandbox } from './drivers/sandbox-driver.ts'
import type { StateStore } from './state-store.ts'

/** The state store key under which pooled sandboxes' handles are recorded. */
export const WARM_POOL_META_KEY = 'warm-pool'

/** A recorded pooled sandbox: enough for its driver to destroy it after a crash. */
export interface RecordedHandle {
  driver: string
  handle: DriverSandbox
}

/** The pooled sandboxes' handles, written through to the store on every change. */
export class PoolRecord {
  readonly #store: StateStore
  readonly #recorded = new Map<string, RecordedHandle>()

  /** A record on `store`; what a previous run left stays until `keep` or the first change. */
  constructor(store: StateStore) {
    this.#store = store
  }

  /** What a previous run recorded (its orphans); none when absent or unreadable. */
  previous(): RecordedHandle[] {
    const raw = this.#store.getMeta(WARM_POOL_META_KEY)
    if (raw === undefined) return []
    try {
      const parsed: unknown = JSON.parse(raw)
      if (Array.isArray(parsed)) return parsed as RecordedHandle[]
    } catch {
      // An unreadable record has nothing to destroy.
    }
    return []
  }

  /** Records a pooled sandbox's handle (again, when it changed). */
  add(id: string, driver: string, handle: DriverSandbox): void {
    this.#recorded.set(id, { driver, handle })
    this.#save()
  }

  /** Forgets a sandbox that left the pool (taken or destroyed). */
  forget(id: string): void {
    if (this.#recorded.delete(id)) this.#save()
  }

  /** Replaces a previous run's record by `entries` (the orphans that could not be destroyed). */
  keep(entries: readonly RecordedHandle[]): void {
    for (const entry of entries) this.#recorded.set(entry.handle.id, entry)
    this.#save()
  }

  #save(): void {
    const value = this.#recorded.size === 0 ? null : JSON.stringify([...this.#recorded.values()])
    this.#store.setMeta(WARM_POOL_META_KEY, value)
  }
}
