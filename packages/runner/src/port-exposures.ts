// A sandbox's exposed ports, as recorded in the runner's state: which ports have been exposed,
// until when, and whether publicly. A port token opens a port only while the port is exposed,
// so `unexpose` revokes every token for it at once, for good: each exposure has a random epoch
// that its tokens' macs cover, drawn anew when a port is exposed after an unexpose, so exposing
// the port again does not revive the old tokens. The count of exposed ports is what
// `maxExposedPortsPerSandbox` caps. Expired exposures are dropped as they are read. Kept beside
// the sandbox in the state store (`exposed-ports:<id>`), so a restarted runner honours the same
// exposures and public flags.
import { randomBytes } from 'node:crypto'
import { RunnerError } from './runner-error.ts'
import type { StateStore } from './state-store.ts'

/** One exposure. */
export interface PortExposure {
  /** When it (and its newest token) expires, ms since the epoch. */
  expiresAt: number
  /** Reachable without a credential. */
  public: boolean
  /** The epoch its tokens are minted under (absent on exposures recorded before epochs). */
  epoch?: string
}

/** Every sandbox's exposed ports. */
export class PortExposures {
  readonly #store: StateStore
  readonly #limit: number
  readonly #now: () => number
  readonly #cache = new Map<string, Map<number, PortExposure>>()

  /** Exposures kept in `store`, at most `limit` ports per sandbox. */
  constructor(store: StateStore, limit: number, now: () => number) {
    this.#store = store
    this.#limit = limit
    this.#now = now
  }

  #read(sandboxId: string): Map<number, PortExposure> {
    let ports = this.#cache.get(sandboxId)
    if (!ports) {
      ports = new Map()
      const stored = this.#store.getMeta(`exposed-ports:${sandboxId}`)
      if (stored)
        for (const [port, e] of Object.entries(JSON.parse(stored) as Record<string, PortExposure>))
          ports.set(Number(port), e)
      this.#cache.set(sandboxId, ports)
    }
    const now = this.#now()
    for (const [port, e] of ports) if (e.expiresAt <= now) ports.delete(port)
    return ports
  }

  #write(sandboxId: string, ports: Map<number, PortExposure>): void {
    this.#store.setMeta(
      `exposed-ports:${sandboxId}`,
      ports.size === 0 ? null : JSON.stringify(Object.fromEntries(ports)),
    )
  }

  /**
   * Records that `port` is exposed until `expiresAt`; exposing it again extends it (to the later
   * expiry, same epoch) and sets `public`. Returns the exposure now recorded.
   * TOO_MANY_EXPOSED_PORTS when it is a new port past the limit.
   */
  expose(sandboxId: string, port: number, exposure: Omit<PortExposure, 'epoch'>): PortExposure {
    const ports = this.#read(sandboxId)
    const current = ports.get(port)
    if (!current && ports.size >= this.#limit)
      throw new RunnerError(
        'TOO_MANY_EXPOSED_PORTS',
        `sandbox ${sandboxId} already has ${ports.size} ports exposed (${[...ports.keys()].join(', ')}); the limit is ${this.#limit}. Unexpose one first`,
        { details: { limit: this.#limit, value: ports.size } },
      )
    const recorded: PortExposure = {
      expiresAt: Math.max(current?.expiresAt ?? 0, exposure.expiresAt),
      public: exposure.public,
      epoch: current ? current.epoch : randomBytes(16).toString('base64url'),
    }
    if (recorded.epoch === undefined) delete recorded.epoch
    ports.set(port, recorded)
    this.#write(sandboxId, ports)
    return recorded
  }

  /** Ends `port`'s exposure (its tokens stop working); false when it was not exposed. */
  unexpose(sandboxId: string, port: number): boolean {
    const ports = this.#read(sandboxId)
    const had = ports.delete(port)
    this.#write(sandboxId, ports)
    return had
  }

  /** The live exposure of `port`, or null. */
  get(sandboxId: string, port: number): PortExposure | null {
    return this.#read(sandboxId).get(port) ?? null
  }

  /** Drops a destroyed sandbox's exposures. */
  forget(sandboxId: string): void {
    this.#cache.delete(sandboxId)
    this.#store.setMeta(`exposed-ports:${sandboxId}`, null)
  }
}
