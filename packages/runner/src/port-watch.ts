// Port discovery events for one sandbox: its listening ports, polled from the agent (which reads
// `/proc/net/tcp{,6}` inside the sandbox's namespace) while someone watches, and turned into
// `port_opened` / `port_closed` by port number. A new watcher first gets `port_opened` for every
// port open now. One poll serves every watcher of a sandbox; polling stops with the last one.
import type { ListeningPort, PortEvent } from '@conch/protocol'

/** How often a watched sandbox's ports are read. */
export const PORT_POLL_MS = 500

/** Reads a sandbox's listening ports; throws when the sandbox is gone. */
export type PortReader = () => Promise<ListeningPort[]>

/** Watches one sandbox's ports for any number of subscribers. */
export class PortWatch {
  readonly #read: PortReader
  readonly #subscribers = new Set<(event: PortEvent | null) => void>()
  #open = new Map<number, string[]>()
  #timer: NodeJS.Timeout | undefined
  #primed: Promise<void> | null = null

  /** A watch that reads ports with `read`. */
  constructor(read: PortReader) {
    this.#read = read
  }

  /** Whether anyone watches. */
  get idle(): boolean {
    return this.#subscribers.size === 0
  }

  /**
   * Calls `listener` with the open ports, then with every change; `null` means the sandbox is
   * gone and no event follows. Returns the unsubscribe function.
   */
  async subscribe(listener: (event: PortEvent | null) => void): Promise<() => void> {
    const unsubscribe = (): void => {
      this.#subscribers.delete(listener)
      if (this.idle) this.#stop()
    }
    if (!this.#timer) {
      this.#primed = this.#poll()
      this.#timer = setInterval(() => void this.#poll(), PORT_POLL_MS)
      this.#timer.unref()
    }
    await this.#primed
    // The snapshot and the subscription happen in one tick, so no change is missed or repeated.
    for (const [port, addresses] of this.#open) listener({ type: 'port_opened', port, addresses })
    this.#subscribers.add(listener)
    return unsubscribe
  }

  #stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
    this.#open = new Map()
  }

  async #poll(): Promise<void> {
    let ports: ListeningPort[]
    try {
      ports = await this.#read()
    } catch {
      for (const listener of this.#subscribers) listener(null)
      this.#subscribers.clear()
      this.#stop()
      return
    }
    if (!this.#timer) return
    const now = new Map<number, string[]>()
    for (const p of ports) now.set(p.port, [...(now.get(p.port) ?? []), p.address])
    const events: PortEvent[] = []
    for (const [port, addresses] of now)
      if (!this.#open.has(port)) events.push({ type: 'port_opened', port, addresses })
    for (const port of this.#open.keys())
      if (!now.has(port)) events.push({ type: 'port_closed', port, addresses: [] })
    this.#open = now
    for (const event of events) for (const listener of this.#subscribers) listener(event)
  }
}
