import type { SessionInfo } from './resource-info.ts'
import type { RunLedger } from './run-ledger.ts'

// Where a shell is in its session's output log, and how it picks up after a reconnect. The
// shell knows the offset after the last output byte it has seen; a new socket asks for replay
// from there, and output it has seen already is cut off. A run that was sent but never seen to
// start either reached the runner (it is queued, running, or its frames were replayed) or was
// lost with the old socket: once the runner reports an idle session, and a ping round trip has
// flushed the frames it sent before answering, a run still not started never arrived, so it is
// sent again in order. Runs are held in the outbox while that is being found out.

/** What resuming needs from its shell. */
export interface ShellResumeInit {
  /** The shell's runs. */
  ledger: RunLedger
  /** Asks the runner for the session's state. */
  refresh: () => Promise<SessionInfo>
  /** Sends a frame now; false when no socket is open. */
  send: (frame: string) => boolean
  /** The shell cannot go on (reconciling failed). */
  fail: (error: unknown) => void
  /** Whether the shell has closed for good. */
  closed: () => boolean
}

/** A shell's position in its session's log, and its reconnect reconciliation. */
export class ShellResume {
  readonly #init: ShellResumeInit
  #offset = 0
  #hasOffset = false
  #live = false
  #generation = 0
  #reconciling = false
  #exitWaiters: (() => void)[] = []
  readonly #pongWaiters = new Map<number, () => void>()

  /** Starts at `offset` when the caller asked for one; otherwise at the runner's. */
  constructor(init: ShellResumeInit, offset: number | undefined) {
    this.#init = init
    if (offset !== undefined) {
      this.#offset = offset
      this.#hasOffset = true
    }
  }

  /** The offset after the last output byte seen. */
  get offset(): number {
    return this.#offset
  }

  /** The offset to resume from, or null before the shell has one. */
  get resumeFrom(): number | null {
    return this.#hasOffset ? this.#offset : null
  }

  /** Whether runs may go on the wire now: the socket is live and nothing is being reconciled. */
  get canSend(): boolean {
    return this.#live && !this.#reconciling
  }

  /** Moves the position forward to `offset` (never back). */
  advance(offset: number): void {
    if (offset > this.#offset || !this.#hasOffset) {
      this.#offset = offset
      this.#hasOffset = true
    }
  }

  /**
   * The part of output `[offset, offset + bytes.length)` not seen yet, or null when all of it
   * was; the position moves past it.
   */
  unseen(bytes: Uint8Array, offset: number): Uint8Array | null {
    const end = offset + bytes.length
    if (this.#hasOffset && end <= this.#offset && bytes.length > 0) return null
    const fresh = this.#hasOffset && offset < this.#offset ? bytes.subarray(this.#offset - offset) : bytes
    this.advance(end)
    return fresh
  }

  /**
   * The runner attached at `offset`: the first time that is the position; later, an offset
   * past the position means output was skipped, returned as the offset the log resumes at.
   */
  attached(offset: number): number | null {
    if (!this.#hasOffset) {
      this.advance(offset)
      return null
    }
    return offset > this.#offset ? offset : null
  }

  /** A new socket opened. */
  opened(): void {
    this.#generation++
  }

  /** Replay is complete and output is live again. */
  live(): void {
    this.#live = true
  }

  /** The socket dropped: round trips and waits on the old one end. */
  dropped(): void {
    this.#live = false
    for (const resolve of this.#pongWaiters.values()) resolve()
    this.#pongWaiters.clear()
    this.runEnded()
  }

  /** A run ended: a reconciliation waiting for an idle session looks again. */
  runEnded(): void {
    // Nearly always none: a run's end then costs no allocation.
    if (this.#exitWaiters.length === 0) return
    const waiters = this.#exitWaiters
    this.#exitWaiters = []
    for (const wake of waiters) wake()
  }

  /** A pong arrived. */
  pong(t: number): void {
    const resolve = this.#pongWaiters.get(t)
    if (resolve) {
      this.#pongWaiters.delete(t)
      resolve()
    }
  }

  /** After a reconnect: sends again the runs that never reached the runner, then the outbox. */
  async reconcile(): Promise<void> {
    if (this.#reconciling) return
    const { ledger } = this.#init
    const generation = this.#generation
    this.#reconciling = true
    try {
      while (generation === this.#generation && !this.#init.closed()) {
        if (![...ledger.runs()].some((r) => r.state === 'sent' && !r.abandoned)) break
        const info = await this.#init.refresh()
        if (generation !== this.#generation) return
        if (info.running !== null || info.queued > 0) {
          await new Promise<void>((resolve) => this.#exitWaiters.push(resolve))
          continue
        }
        await this.#roundTrip()
        if (generation !== this.#generation) return
        for (const run of ledger.runs()) {
          if (run.state !== 'sent') continue
          if (run.abandoned) ledger.forget(run)
          else if (!this.#init.send(run.frame)) return
        }
        break
      }
    } catch (err) {
      if (generation === this.#generation) this.#init.fail(err)
    } finally {
      this.#reconciling = false
      if (generation === this.#generation) ledger.flush()
    }
  }

  #roundTrip(): Promise<void> {
    const t = Date.now() + Math.random()
    return new Promise((resolve) => {
      this.#pongWaiters.set(t, resolve)
      if (!this.#init.send(JSON.stringify({ type: 'ping', t }))) {
        this.#pongWaiters.delete(t)
        resolve()
      }
    })
  }
}
