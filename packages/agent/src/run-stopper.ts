// Interrupt and timeout of a session's active run: what Ctrl-C does, and the escalation of
// promise 6 (SIGINT, SIGTERM, SIGKILL, and bash itself only when it never answers).
//
// Model: before the first SIGINT, the lines written behind the run are held (their command
// files run nothing, see run-window.ts), so the SIGINT and its repeats can stop only this run.
// SIGINT aborts bash's whole current line, including the run's own end call, so a sync line
// follows: the end function called alone with a fresh nonce. A loop of fast external commands
// can miss one SIGINT, so it is repeated while none of the run's markers has arrived; a repeat
// that aborts the sync line is recovered by a fresh one (a resync). A sync line still
// unanswered when its run ends stays pending, and nothing new is written until it answers.
import type { StreamName } from '@conch/protocol'
import type { Clock } from './clock.ts'
import { newNonce } from './framing-lines.ts'
import type { Logger } from './logger.ts'
import { type ProcessTable, sendSignal } from './process-tree.ts'
import type { Run, SyncLine } from './session-run.ts'

const POLL_MS = 20
/** Interval and count of repeated SIGINTs while an interrupted run has not ended. */
const INTERRUPT_REPEAT_MS = 100
const INTERRUPT_REPEATS = 20
/** How long a sync line may go unanswered before a fresh one replaces it, and how often. */
const SYNC_WATCH_MS = 500
const SYNC_RESYNCS = 5

/** What the stopper needs of its session. */
export interface StopperHost {
  /** Session id, for logs. */
  readonly sessionId: string
  /** bash's pid while it runs. */
  readonly bashPid: number | undefined
  /** Whether the shell has closed. */
  readonly closed: boolean
  /** The sync line waiting after its run ended, if any. */
  readonly pendingSync: SyncLine | null
  readonly processTable: ProcessTable
  readonly clock: Clock
  readonly logger: Logger
  /** Time between SIGINT, SIGTERM and SIGKILL. */
  readonly killGraceMs: number
  /** Whether `run` is the active run. */
  isActive(run: Run): boolean
  /** Holds the lines written behind `run`. */
  holdLinesBehind(run: Run): void
  /** Expects `nonce` on both streams and writes a sync line for it. */
  writeSync(nonce: string): void
  /** Ends a stopped run whose markers have arrived, and moves the session on. */
  finishStopped(run: Run): void
  /** Kills bash and closes the session with `reason`. */
  killBash(reason: string): Promise<void>
}

/** Interrupts and times out the active run of one session. */
export class RunStopper {
  readonly #host: StopperHost

  /** A stopper for the session `host`. */
  constructor(host: StopperHost) {
    this.#host = host
  }

  /**
   * SIGINT to bash's process group and the run's processes, then a sync line (once per run),
   * with the SIGINT repeated while none of the run's markers has arrived.
   */
  interrupt(run: Run): void {
    const host = this.#host
    const pid = host.bashPid
    if (pid === undefined) return
    if (run.sync === null) host.holdLinesBehind(run)
    const table = host.processTable
    const procs = table.sessionMembers(pid, pid, run.startTicks)
    // Like Ctrl-C in a terminal: SIGINT to bash's whole process group, which without job
    // control holds bash and every foreground process of the run, including one forked after
    // any /proc snapshot. Background jobs ignore SIGINT (bash starts them that way).
    sendSignal(-pid, 'SIGINT')
    table.signal(procs, 'SIGINT')
    run.sigints += 1
    if (run.sync !== null) return
    const sync: SyncLine = {
      nonce: newNonce(),
      seen: { stdout: false, stderr: false },
      stale: [],
      resyncs: 0,
    }
    run.sync = sync
    host.writeSync(sync.nonce)
    const repeat = (): void => {
      if (!host.isActive(run) || run.done.stdout || run.done.stderr || host.closed) return
      if (run.sigints >= INTERRUPT_REPEATS) {
        this.#resync(sync)
        return
      }
      sendSignal(-pid, 'SIGINT')
      run.sigints += 1
      host.clock.setTimer(INTERRUPT_REPEAT_MS, repeat)
    }
    host.clock.setTimer(INTERRUPT_REPEAT_MS, repeat)
  }

  /** Writes a fresh sync line when a pending one has not answered in time (at most a few times). */
  watchSync(sync: SyncLine): void {
    const host = this.#host
    host.clock.setTimer(SYNC_WATCH_MS, () => {
      if (host.pendingSync !== sync || host.closed || sync.resyncs >= SYNC_RESYNCS) return
      sync.resyncs += 1
      this.#resync(sync)
      this.watchSync(sync)
    })
  }

  /** The timeout procedure of promise 6: SIGINT, SIGTERM, SIGKILL, and bash only as a last resort. */
  async timeOut(run: Run): Promise<void> {
    const host = this.#host
    if (!host.isActive(run) || run.stopping) return
    run.stopping = true
    run.timedOut = true
    const pid = host.bashPid
    if (pid === undefined) return
    const table = host.processTable
    const grace = host.killGraceMs
    host.logger.info({ sessionId: host.sessionId, runId: run.req.runId }, 'run timed out; interrupting it')
    this.interrupt(run)
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      if (await this.#settles(run, grace)) break
      if (host.closed) return
      // bash itself gets SIGINT only once: a second one could land while it reads the sync line.
      table.signal(table.sessionMembers(pid, pid, run.startTicks), signal)
    }
    if (!this.#isSettled(run)) await this.#settles(run, grace)
    if (host.closed || !host.isActive(run)) return
    if (run.done.stdout && run.done.stderr) {
      host.finishStopped(run)
      return
    }
    host.logger.warn(
      { sessionId: host.sessionId, runId: run.req.runId },
      'bash did not answer after a timeout; killing it',
    )
    sendSignal(pid, 'SIGKILL')
    await host.killBash(`bash did not recover after run "${run.req.runId}" timed out, so it was killed`)
  }

  /** Replaces a sync line that bash may have dropped: the old nonce stays expected but no longer counts. */
  #resync(sync: SyncLine): void {
    const fresh = newNonce()
    sync.stale.push(sync.nonce)
    sync.nonce = fresh
    sync.seen = { stdout: false, stderr: false } satisfies Record<StreamName, boolean>
    this.#host.writeSync(fresh)
  }

  #isSettled(run: Run): boolean {
    if (!(run.done.stdout && run.done.stderr)) return false
    const pid = this.#host.bashPid
    if (pid === undefined) return true
    return this.#host.processTable.sessionMembers(pid, pid, run.startTicks).length === 0
  }

  /**
   * Waits up to `ms` for the run's markers and for its processes to be gone. Once the markers
   * are in, processes that are still there after a few polls do not get the rest of the grace
   * period: they ignored the signal, so the caller escalates at once.
   */
  async #settles(run: Run, ms: number): Promise<boolean> {
    const clock = this.#host.clock
    const deadline = clock.monotonicMs() + ms
    let pollsSinceMarkers = 0
    while (!this.#host.closed) {
      if (this.#isSettled(run)) return true
      const left = deadline - clock.monotonicMs()
      if (left <= 0) return false
      if (run.done.stdout && run.done.stderr) {
        pollsSinceMarkers += 1
        if (pollsSinceMarkers > 3) return false
      }
      await new Promise<void>((resolve) => {
        run.wake = resolve
        clock.setTimer(Math.min(POLL_MS, left), resolve)
      })
      run.wake = null
    }
    return false
  }
}
