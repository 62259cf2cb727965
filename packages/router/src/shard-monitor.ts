// What the router knows about each runner: whether it is ready and how full it is, read from
// the runner's public `/readyz` every poll interval. Placement picks the ready shard with the
// lowest share of its sandbox limit; a sandbox placed between two polls counts at once, so a
// burst of creates spreads instead of landing on one runner. A runner that answers under
// another shard name than the table says is never used for placement, and the log says why:
// its ids would name a shard the router would send elsewhere.
import { request } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { Health } from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import type { Shard, ShardTable } from './shard-table.ts'

/** What the router last saw of one shard. */
export interface ShardState {
  /** The shard. */
  readonly shard: Shard
  /** `/readyz` answered 200 with `ok: true` and the right shard name. */
  ready: boolean
  /** The runner answered at all (a 503 while it restores sandboxes counts). */
  reachable: boolean
  /** Sandboxes alive, as last reported plus those placed since. */
  sandboxes: number
  /** The runner's sandbox limit. */
  maxSandboxes: number
  /** Why the shard is not ready, for logs and `/readyz`. */
  problem: string | null
}

/** Largest `/readyz` answer read. */
const MAX_HEALTH_BYTES = 64 * 1024

/** Reads a runner's `/readyz`: status and parsed body, or throws on a transport failure. */
function readReadyz(shard: Shard, timeoutMs: number): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const send = shard.url.protocol === 'https:' ? httpsRequest : request
    const req = send(
      new URL('/readyz', shard.url),
      { method: 'GET', timeout: timeoutMs, agent: false, headers: { connection: 'close' } },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          text += chunk
          if (text.length > MAX_HEALTH_BYTES) req.destroy(new Error('the /readyz answer is too large'))
        })
        res.on('end', () => {
          let body: unknown = null
          try {
            body = JSON.parse(text)
          } catch {
            // A body that is not JSON leaves `body` null; the caller reports it.
          }
          resolve({ status: res.statusCode ?? 0, body })
        })
        res.on('error', reject)
      },
    )
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)))
    req.on('error', reject)
    req.end()
  })
}

/** Polls every shard's `/readyz` and answers placement questions. */
export class ShardMonitor {
  readonly #states: Map<string, ShardState>
  readonly #log: FastifyBaseLogger
  readonly #intervalMs: number
  readonly #timeoutMs: number
  #timer: NodeJS.Timeout | undefined
  #cursor = 0

  /** Creates a monitor; `start` begins polling. */
  constructor(options: {
    shards: ShardTable
    log: FastifyBaseLogger
    intervalMs: number
    timeoutMs: number
  }) {
    this.#states = new Map(
      [...options.shards.values()].map((shard) => [
        shard.name,
        { shard, ready: false, reachable: false, sandboxes: 0, maxSandboxes: 1, problem: 'not polled yet' },
      ]),
    )
    this.#log = options.log
    this.#intervalMs = options.intervalMs
    this.#timeoutMs = options.timeoutMs
  }

  /** Every shard's last known state. */
  states(): ShardState[] {
    return [...this.#states.values()]
  }

  /** Polls every shard once, now; resolves when all answered or failed. */
  async pollAll(): Promise<void> {
    await Promise.all([...this.#states.values()].map((state) => this.#poll(state)))
  }

  /** Polls now and then every interval until `stop`. */
  async start(): Promise<void> {
    await this.pollAll()
    const tick = (): void => {
      this.#timer = setTimeout(() => {
        void this.pollAll().finally(() => {
          if (this.#timer !== undefined) tick()
        })
      }, this.#intervalMs)
      this.#timer.unref()
    }
    tick()
  }

  /** Stops polling. */
  stop(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
  }

  /**
   * The ready shards in placement order: lowest share of the sandbox limit first, ties taken in
   * turn, full shards left out.
   */
  placementOrder(): Shard[] {
    const ready = this.states().filter((s) => s.ready && s.sandboxes < s.maxSandboxes)
    const n = Math.max(1, ready.length)
    const start = this.#cursor++ % n
    const rotated = ready.map((s, i) => ({ s, turn: (i - start + n) % n }))
    rotated.sort(
      (a, b) => a.s.sandboxes / a.s.maxSandboxes - b.s.sandboxes / b.s.maxSandboxes || a.turn - b.turn,
    )
    return rotated.map(({ s }) => s.shard)
  }

  /** Counts a sandbox just placed on `name` until the next poll reports it. */
  notePlaced(name: string): void {
    const state = this.#states.get(name)
    if (state) state.sandboxes += 1
  }

  /** Marks a shard unreachable at once (a forward to it failed), until the next poll. */
  noteUnreachable(name: string, problem: string): void {
    const state = this.#states.get(name)
    if (!state) return
    state.ready = false
    state.reachable = false
    state.problem = problem
  }

  async #poll(state: ShardState): Promise<void> {
    const wasReady = state.ready
    try {
      const { status, body } = await readReadyz(state.shard, this.#timeoutMs)
      state.reachable = true
      const health = Health.safeParse(body)
      if (!health.success) {
        state.ready = false
        state.problem = `/readyz answered ${status} with a body that is not a health answer`
      } else if (health.data.shard !== state.shard.name) {
        state.ready = false
        state.problem = `the runner at ${state.shard.url.origin} reports shard "${health.data.shard ?? '(none)'}", not "${state.shard.name}"; start it with --shard ${state.shard.name}`
      } else {
        if (health.data.load) {
          state.sandboxes = health.data.load.sandboxes
          state.maxSandboxes = health.data.load.maxSandboxes
        }
        state.ready = status === 200 && health.data.ok
        state.problem = state.ready ? null : 'the runner is still restoring its sandboxes'
      }
    } catch (error) {
      state.ready = false
      state.reachable = false
      state.problem = `no answer from ${state.shard.url.origin}: ${(error as Error).message}`
    }
    if (wasReady !== state.ready) {
      if (state.ready) this.#log.info({ shard: state.shard.name }, 'shard ready')
      else this.#log.warn({ shard: state.shard.name, problem: state.problem }, 'shard not ready')
    }
  }
}
