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
// The stopper owns that pending sync line, recognises sync markers, and holds (and later
// resets) the lines behind an interrupted run.
import type { StreamName } from '@conch/protocol'
import type { Clock } from './clock.ts'
import { newNonce } from './framing-lines.ts'
import type { Logger } from './logger.ts'
import { type ProcessTable, sendSignal } from './process-tree.ts'
import type { Run, SyncLine } from './session-run.ts'

const STREAMS: readonly StreamName[] = ['stdout', 'stderr']
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
  readonly processTable: ProcessTable
  readonly clock: Clock
  readonly logger: Logger
  /** Time between SIGINT, SIGTERM and SIGKILL. */
  readonly killGraceMs: number
  /** Whether `run` is the active run. */
  isActive(run: Run): boolean
  /** The runs whose lines are in bash, oldest first. */
  readonly windowRuns: readonly Run[]
  /** Expects markers with `nonce` on both streams. */
  expect(nonce: string): void
  /** Replaces the command file of `slot` by a held body printing `nonce`'s markers. */
  holdCommand(slot: number, nonce: string): void
  /** Writes a sync line for `nonce` into bash. */
  writeSync(nonce: string): void
  /** A sync line's marker on `stream`: every line in the window has ended on it. */
  markAllEnded(stream: StreamName): void
  /** Stops expecting `nonce` on `stream` (what was kept back as a possible marker is output). */
  forget(stream: StreamName, nonce: string): void
  /** Logs output that belongs to no run. */
  logUnowned(stream: StreamName, bytes: Buffer): void
  /** Ends a stopped run whose markers have arrived, and moves the session on. */
  finishStopped(run: Run): void
  /** Kills bash and closes the session with `reason`. */
  killBash(reason: string): Promise<void>
}

/** Interrupts and times out the active run of one session. */
export class RunStopper {
  readonly #host: StopperHost
  #pendingSync: SyncLine | null = null

  /** A stopper for the session `host`. */
  constructor(host: StopperHost) {
    this.#host = host
  }

  /** The sync line still unanswered after its run ended: nothing new is written until it answers. */
  get pendingSync(): SyncLine | null {
    return this.#pendingSync
  }

  /** An interrupted run ended: its sync line, if still unanswered, stays pending and watched. */
  runEnded(sync: SyncLine): void {
    if (sync.seen.stdout && sync.seen.stderr) {
      this.#forgetAll(sync.stale)
      return
    }
    // The run is no longer active, so nothing else touches its sync line from here on.
    this.#pendingSync = sync
    this.watchSync(sync)
  }

  /**
   * A marker that is not a line's: if it is the sync line's of the `active` run or the pending
   * one, records it and returns true (the caller then moves the window on).
   */
  onSyncMarker(active: Run | null, stream: StreamName, nonce: string): boolean {
    const host = this.#host
    const runSync = active?.sync ?? null
    if (runSync !== null && (nonce === runSync.nonce || runSync.stale.includes(nonce))) {
      // The sync line was written behind every line in the window.
      host.markAllEnded(stream)
      if (nonce === runSync.nonce) runSync.seen[stream] = true
      host.forget(stream, nonce)
      return true
    }
    const sync = this.#pendingSync
    if (sync === null || (nonce !== sync.nonce && !sync.stale.includes(nonce))) return false
    host.markAllEnded(stream)
    host.forget(stream, nonce)
    if (nonce === sync.nonce) {
      sync.seen[stream] = true
      if (sync.seen.stdout && sync.seen.stderr) {
        // bash runs lines in order: an older sync line still unanswered was aborted.
        this.#forgetAll(sync.stale)
        this.#pendingSync = null
      }
    }
    return true
  }

  /**
   * SIGINT to bash's process group and the run's processes, then a sync line (once per run),
   * with the SIGINT repeated while none of the run's markers has arrived.
   */
  interrupt(run: Run): void {
    const host = this.#host
    const pid = host.bashPid
    if (pid === undefined) return
    if (run.sync === null) this.#holdLinesBehind(run)
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
    host.expect(sync.nonce)
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
      if (this.#pendingSync !== sync || host.closed || sync.resyncs >= SYNC_RESYNCS) return
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
    this.#host.expect(fresh)
    this.#host.writeSync(fresh)
  }

  /**
   * Holds the command files of the lines written behind `run`, before any SIGINT: a line bash
   * has not reached then runs nothing (a SIGINT meant for `run` can no longer stop a later
   * command) and its run is written again once the interrupt has settled.
   */
  #holdLinesBehind(run: Run): void {
    for (const later of this.#host.windowRuns) {
      if (later === run || later.held) continue
      later.heldNonce = newNonce()
      this.#host.expect(later.heldNonce)
      this.#host.holdCommand(later.slot, later.heldNonce)
      later.held = true
    }
  }

  /** Returns a held run whose line ran nothing (it left the window) to its queued state. */
  resetHeld(run: Run): void {
    this.#forgetAll([run.nonce, run.heldNonce].filter((n) => n !== ''))
    // Output that came before its held marker was not its own (a background job's, say).
    if (run.early !== null) for (const s of STREAMS) for (const b of run.early[s]) this.#host.logUnowned(s, b)
    run.nonce = ''
    run.done = { stdout: false, stderr: false }
    run.exitCode = null
    run.held = false
    run.heldNonce = ''
    run.heldSeen = false
    run.early = null
  }

  #forgetAll(nonces: readonly string[]): void {
    for (const nonce of nonces) for (const s of STREAMS) this.#host.forget(s, nonce)
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
