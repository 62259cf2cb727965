// The runs of one session's shell: the queue, the write-ahead window, the active run, their
// output and markers, and the entries they leave in the session's history (docs on the model:
// bash-session.ts). The interrupt and timeout procedures are wired in by session-stopper.ts.
//
// Model: runs wait in a FIFO queue and are written into bash up to the window (run-window.ts);
// the first line's run is active once the line before it has ended. A marker ends its line and,
// on its stream, every earlier line; output goes to the first line whose marker has not arrived
// on its stream (kept aside until that run is active, so the log records starts, output and
// exits in run order). Runs whose lines were held by an interrupt (run-stopper.ts) go back to
// the head of the queue once every held line has ended.
import type { StreamName } from '@conch/protocol'
import { AgentError } from './agent-error.ts'
import type { BashProcess } from './bash-process.ts'
import type { ResolvedSessionOptions } from './bash-session-options.ts'
import { type FramingLines, newNonce, shellQuote } from './framing-lines.ts'
import type { MarkerScanner } from './marker-scanner.ts'
import type { OutputLog } from './output-log.ts'
import { RunQueue } from './run-queue.ts'
import { RunStdinPipe } from './run-stdin-pipe.ts'
import type { RunStopper } from './run-stopper.ts'
import { RunWindow } from './run-window.ts'
import type { SessionFiles } from './session-files.ts'
import type { SessionHistory } from './session-history.ts'
import {
  checkRunRequest,
  newRun,
  outcomeOf,
  type Run,
  type RunOutcome,
  type RunRequest,
} from './session-run.ts'
import { sessionStopper } from './session-stopper.ts'

const STREAMS: readonly StreamName[] = ['stdout', 'stderr']

/** What the runs need of their session. */
export interface RunsHost {
  /** Session id, for errors and logs. */
  readonly sessionId: string
  readonly opts: ResolvedSessionOptions
  /** Default timeout of runs. */
  readonly commandTimeoutMs: number
  readonly log: OutputLog
  readonly files: SessionFiles
  readonly framing: FramingLines
  readonly scanners: Record<StreamName, MarkerScanner>
  readonly bash: BashProcess
  /** The session's command history, where user runs are recorded. */
  readonly history: SessionHistory
  /** Whether bash has answered its init line and is not closed. */
  readonly ready: boolean
  /** Whether the shell has closed. */
  readonly closed: boolean
  /** Closes the shell (bash was killed). */
  close(info: { code: null; signal: string; reason: string }): Promise<void>
}

/** The queued, written-ahead and active runs of one shell. */
export class SessionRuns {
  readonly #host: RunsHost
  readonly #queue = new RunQueue<Run>()
  /** Runs whose lines are in bash, in bash's order; the first is `#active` once it started. */
  readonly #window = new RunWindow()
  readonly #stopper: RunStopper
  /** Runs whose held lines ran nothing, in order, until every held line has ended. */
  #heldBack: Run[] = []
  /** The next line written must set `$?` back first (held lines left it 0). */
  #restoreStatus = false
  /** Ids of the active and queued runs, so a duplicate id is found without scanning the queue. */
  readonly #inFlight = new Set<string>()
  #active: Run | null = null
  /** The active run's stdin pipe, when it asked for one. */
  #stdinPipe: RunStdinPipe | null = null
  #lastExitCode = 0
  readonly #history: SessionHistory

  /** The runs of the session `host`. */
  constructor(host: RunsHost) {
    this.#host = host
    this.#history = host.history
    this.#stopper = sessionStopper(host, this.#window, {
      isActive: (run) => this.#active === run,
      forget: (stream, nonce) => this.#forget(stream, nonce),
      finishStopped: (run) => {
        this.#finish(run)
        this.#advance()
        this.fill()
      },
    })
  }

  /** The id of the run in progress. */
  get running(): string | null {
    const active = this.#active
    // The agent's own runs (warm-up, snapshot capture and restore) are not the user's commands:
    // a listing never shows them, and they never keep a sandbox awake.
    return active === null || active.req.internal === true ? null : active.req.runId
  }

  /** Runs waiting behind the active one (written ahead into bash or not). */
  get queued(): number {
    return this.#queue.size + this.#window.size - (this.#active === null ? 0 : 1)
  }

  /** The exit code of the last finished run (what `$?` holds in the shell). */
  get lastExitCode(): number {
    return this.#lastExitCode
  }

  /** Puts back `$?` as a snapshot kept it. Set before the first run. */
  set lastExitCode(code: number) {
    this.#lastExitCode = code
  }

  /** Queues a run of an open shell; resolves with its buffered result. */
  add(req: RunRequest): Promise<RunOutcome> {
    return new Promise<RunOutcome>((resolve, reject) => this.enqueue(req, resolve, reject))
  }

  /**
   * Queues a run of an open shell without a promise (its line goes into bash at once when the
   * window has room): `resolve` gets its buffered result, `reject` the error that ends it. An
   * invalid request throws its typed error, and nothing is queued.
   */
  enqueue(req: RunRequest, resolve: (outcome: RunOutcome) => void, reject: (err: Error) => void): void {
    const invalid = checkRunRequest(
      this.#host.sessionId,
      req,
      this.#host.opts.maxCommandBytes,
      this.#inFlight,
    )
    if (invalid !== null) throw invalid
    this.#inFlight.add(req.runId)
    const cap = req.outputCapBytes ?? this.#host.opts.outputCapBytes
    this.#queue.push(newRun(req, cap, resolve, reject))
    this.fill()
  }

  /**
   * Does what Ctrl-C does to the active run (optionally only if it is `runId`): SIGINT to
   * bash and to the run's processes. Returns whether a run was interrupted.
   */
  interrupt(runId?: string): boolean {
    const run = this.#active
    if (run === null || (runId !== undefined && run.req.runId !== runId)) return false
    run.interrupted = true
    this.#stopper.interrupt(run)
    return true
  }

  /** Writes to (or ends) the stdin pipe of run `runId`, which must be running with `stdinPipe`. */
  writeStdin(runId: string, bytes: Uint8Array | undefined, end: boolean): void {
    const pipe = this.#active?.req.runId === runId ? this.#stdinPipe : null
    if (!pipe) {
      throw new AgentError(
        'BAD_REQUEST',
        `run "${runId}" in session "${this.#host.sessionId}" is not running with a stdin pipe; start it with stdin: 'pipe' and write once it has started`,
      )
    }
    if (bytes !== undefined && bytes.byteLength > 0) pipe.write(bytes)
    if (end) pipe.end()
  }

  /**
   * Writes queued runs into bash in one write, up to the window, once bash has drained half of
   * it and unless an interrupt is being settled, and starts the first if nothing is active.
   */
  fill(): void {
    if (!this.#host.ready || this.#stopper.pendingSync !== null || this.#active?.sync) return
    // Nothing is written behind held lines; writing lines holds none, so one look will do.
    // While bash has half a window left to run, more lines wait, to go in many per write.
    if (this.#queue.size === 0 || !this.#window.wantsLines || this.#window.runs.some((r) => r.held)) return
    let lines = ''
    for (let run = this.#queue.peek(); run !== undefined; run = this.#queue.peek()) {
      if (!this.#window.canWrite(run)) break
      this.#queue.take()
      let line: string
      try {
        line = this.#writeLine(run)
      } catch (error) {
        this.#refuse(run, error)
        continue
      }
      lines += line
    }
    if (lines.length === 0) return
    this.#host.bash.write(lines)
    this.#advance()
  }

  /**
   * Adds a run to the window (which gives it its slot), writes its files, draws its nonce and
   * returns its line. A file that cannot be written (the session's temp dir full) takes the run
   * back out of the window and throws, so no run waits there for a line never written.
   */
  #writeLine(run: Run): string {
    this.#window.add(run)
    let stdinRedirect = '/dev/null'
    try {
      let text = run.command
      // Internal runs are written only into an empty window, so `$?` is final here.
      if (run.req.internal === true) text += `\n\\builtin return ${this.#lastExitCode}\n`
      this.#host.files.writeCommand(run.slot, text)
      if (run.req.stdinPipe === true) {
        // A stdin-pipe run is alone in the window, so it is the next active run.
        this.#stdinPipe = new RunStdinPipe(
          this.#host.files.dir,
          run.req.runId,
          this.#host.opts.sandboxGid,
          this.#host.bash.pid,
        )
        stdinRedirect = shellQuote(this.#stdinPipe.path)
      } else if (run.req.stdin !== undefined) {
        stdinRedirect = shellQuote(this.#host.files.writeStdin(run.slot, run.req.stdin))
      }
    } catch (error) {
      this.#window.withdraw(run)
      throw error
    }
    run.nonce = newNonce()
    for (const s of STREAMS) this.#host.scanners[s].expect(run.nonce)
    const status = this.#restoreStatus ? this.#lastExitCode : undefined
    this.#restoreStatus = false
    return this.#host.framing.runLine(
      this.#host.files.commandPath(run.slot),
      stdinRedirect,
      run.nonce,
      run.req.internal,
      status,
    )
  }

  /** Ends a run whose files could not be written, before it was in the window: a typed error. */
  #refuse(run: Run, error: unknown): void {
    this.#inFlight.delete(run.req.runId)
    const reason = error instanceof Error ? error.message : String(error)
    run.reject(
      new AgentError(
        'INTERNAL',
        `run "${run.req.runId}" in session "${this.#host.sessionId}" was not started: the agent could not write its command file (${reason}); free space in the sandbox's temporary directory (/dev/shm, /tmp) and run it again`,
      ),
    )
  }

  /** Makes a run the active one: its start is logged and recorded, its timeout starts. */
  #activate(run: Run): void {
    const clock = this.#host.opts.clock
    this.#active = run
    run.activated = true
    run.startedAtMs = clock.monotonicMs()
    run.startTicks = this.#host.opts.processTable.nowTicks()
    run.startOffset = this.#host.log.endOffset
    if (run.req.internal !== true) {
      this.#host.log.appendRunStart(run.req.runId)
      run.history = this.#history.record(run.req.command, clock.now())
    }
    const timeoutMs = run.req.timeoutMs ?? this.#host.commandTimeoutMs
    run.timer = clock.setTimer(timeoutMs, () => void this.#stopper.timeOut(run))
    const early = run.early
    run.early = null
    if (early !== null) for (const s of STREAMS) for (const bytes of early[s]) this.#append(run, s, bytes)
  }

  /**
   * Moves the window on: ends the runs whose lines have ended, in order, starts the next, and
   * puts back at the head of the queue the runs whose held lines ran nothing.
   */
  #advance(): void {
    for (let run = this.#window.head; run !== undefined; run = this.#window.head) {
      const ended = run.done.stdout && run.done.stderr
      if (!run.activated) {
        if (run.held) {
          if (!ended) break
          // A held line that printed nothing and no held marker was aborted before the body.
          if (run.heldSeen || (run.exitCode === null && run.early === null)) {
            this.#window.shift()
            this.#stopper.resetHeld(run)
            this.#heldBack.push(run)
            continue
          }
        }
        this.#activate(run)
      }
      if (!ended) break
      if (run.stopping) {
        run.wake?.()
        break
      }
      this.#finish(run)
    }
    if (this.#heldBack.length > 0 && !this.#window.runs.some((r) => r.held)) {
      this.#queue.pushFront(this.#heldBack)
      this.#heldBack = []
      // Held lines left `$?` 0 in the shell: the next line sets it back first.
      this.#restoreStatus = true
    }
  }

  /** Output bytes of one stream, to the run they belong to (or to no run). */
  deliver(stream: StreamName, bytes: Buffer): void {
    if (bytes.length === 0) return
    const run = this.#window.owner(stream)
    if (run === undefined) {
      this.#host.log.appendData(stream, null, bytes)
      return
    }
    if (!run.activated) {
      run.early ??= { stdout: [], stderr: [] }
      // A copy: `bytes` may be a pooled read buffer that is read into again (read-buffer-pool.ts).
      run.early[stream].push(Buffer.from(bytes))
      return
    }
    this.#append(run, stream, bytes)
  }

  /** Output of the active run: to its buffered result and, unless internal, the log. */
  #append(run: Run, stream: StreamName, bytes: Buffer): void {
    run.out[stream].append(bytes)
    if (run.req.internal !== true) this.#host.log.appendData(stream, run.req.runId, bytes)
  }

  #forget(stream: StreamName, nonce: string): void {
    this.deliver(stream, this.#host.scanners[stream].forget(nonce))
  }

  /** A marker of a run or sync line (not the init line's). */
  onMarker(stream: StreamName, nonce: string, exitCode: number | null): void {
    const index = this.#window.indexOf(nonce)
    if (index >= 0) {
      this.#window.markEnded(index, stream, exitCode)
      this.#advance()
      return
    }
    const held = this.#window.indexOfHeld(nonce)
    if (held >= 0) {
      this.#window.markHeld(held, stream, exitCode)
      this.#forget(stream, nonce)
      this.#advance()
      return
    }
    if (this.#stopper.onSyncMarker(this.#active, stream, nonce)) this.#advance()
  }

  #finish(run: Run): void {
    if (this.#active !== run) return
    this.#host.opts.clock.clearTimer(run.timer)
    this.#forgetAll(run.heldNonce === '' ? [run.nonce] : [run.nonce, run.heldNonce])
    this.#window.shift()
    this.#active = null
    this.#stdinPipe?.close()
    this.#stdinPipe = null
    this.#inFlight.delete(run.req.runId)
    if (run.sync !== null) this.#stopper.runEnded(run.sync)
    const exitCode = run.exitCode ?? 130
    const oomKilled = this.#host.opts.oomCheck(exitCode)
    this.#lastExitCode = exitCode
    const durationMs = this.#host.opts.clock.monotonicMs() - run.startedAtMs
    if (run.history !== null) {
      run.history.exitCode = exitCode
      run.history.durationMs = durationMs
    }
    if (run.req.internal !== true) {
      this.#host.log.appendRunExit({
        id: run.req.runId,
        code: exitCode,
        timedOut: run.timedOut,
        durationMs,
        ...(oomKilled ? { oomKilled } : {}),
      })
    }
    run.resolve(outcomeOf(run, exitCode, oomKilled, durationMs, this.#host.log.endOffset))
  }

  #forgetAll(nonces: readonly string[]): void {
    for (const nonce of nonces) for (const s of STREAMS) this.#forget(s, nonce)
  }

  /** The shell closed: every run, active, written ahead or queued, is rejected with `err`. */
  closeAll(err: Error): void {
    const active = this.#active
    this.#active = null
    this.#stdinPipe?.close()
    this.#stdinPipe = null
    if (active !== null) {
      this.#host.opts.clock.clearTimer(active.timer)
      active.wake?.()
      if (active.history !== null)
        active.history.durationMs = this.#host.opts.clock.monotonicMs() - active.startedAtMs
      active.reject(err)
    }
    for (const run of this.#window.clear()) if (run !== active) run.reject(err)
    for (const run of this.#heldBack.splice(0)) run.reject(err)
    for (let run = this.#queue.take(); run !== undefined; run = this.#queue.take()) run.reject(err)
    this.#inFlight.clear()
  }
}
