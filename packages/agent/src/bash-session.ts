import type { HistoryEntry, ShellClosedInfo, StreamName } from '@conch/protocol'
import { AgentError, ShellClosedError } from './agent-error.ts'
import { BashProcess } from './bash-process.ts'
import {
  type BashSessionOptions,
  describeExit,
  type ResolvedSessionOptions,
  resolveSessionOptions,
} from './bash-session-options.ts'
import { FramingLines, HELD_CODE, newNonce, shellQuote } from './framing-lines.ts'
import { MarkerScanner } from './marker-scanner.ts'
import { OutputLog } from './output-log.ts'
import { RunQueue } from './run-queue.ts'
import { RunStdinPipe } from './run-stdin-pipe.ts'
import { RunStopper } from './run-stopper.ts'
import { RunWindow } from './run-window.ts'
import { SessionFiles } from './session-files.ts'
import { type HistoryQuery, SessionHistory } from './session-history.ts'
import {
  checkRunRequest,
  newRun,
  type Run,
  type RunOutcome,
  type RunRequest,
  type SyncLine,
} from './session-run.ts'

export { type BashSessionOptions, describeExit } from './bash-session-options.ts'

type Phase = 'starting' | 'ready' | 'closed'

const STREAMS: readonly StreamName[] = ['stdout', 'stderr']

/** A long-lived bash process that executes queued runs and keeps its state between them. */
export class BashSession {
  /** Session id; a spare shell takes its session's id when it is adopted. */
  id: string
  /** The directory the session started in. */
  readonly cwd: string
  /** Default timeout of runs. */
  readonly commandTimeoutMs: number
  /** Whether the environment started empty. */
  readonly cleanEnv: boolean
  /** When it was created (ms since the epoch); for an adopted spare, when it was adopted. */
  createdAt: number
  /** The session's output log (scrollback). */
  readonly log: OutputLog
  /** Resolves when bash is ready for its first run; rejects if it closed first. */
  readonly ready: Promise<void>
  /** Resolves once, when the shell closes. */
  readonly closed: Promise<ShellClosedInfo>

  readonly #opts: ResolvedSessionOptions
  readonly #files: SessionFiles
  readonly #framing = new FramingLines()
  readonly #bash: BashProcess
  readonly #scanners: Record<StreamName, MarkerScanner>
  readonly #queue = new RunQueue<Run>()
  /** Runs whose lines are in bash, in bash's order; the first is `#active` once it started. */
  readonly #window = new RunWindow()
  readonly #stopper: RunStopper
  /** Runs whose held lines ran nothing, in order, until every held line has ended. */
  #heldBack: Run[] = []
  /** Ids of the active and queued runs, so a duplicate id is found without scanning the queue. */
  readonly #inFlight = new Set<string>()
  #phase: Phase = 'starting'
  #active: Run | null = null
  /** The active run's stdin pipe, when it asked for one. */
  #stdinPipe: RunStdinPipe | null = null
  #pendingSync: SyncLine | null = null
  #initNonce: string
  #initSeen: Record<StreamName, boolean> = { stdout: false, stderr: false }
  #closedInfo: ShellClosedInfo | null = null
  #resolveReady: () => void = () => {}
  #rejectReady: (err: Error) => void = () => {}
  #resolveClosed: (info: ShellClosedInfo) => void = () => {}
  #lastExitCode = 0
  readonly #history = new SessionHistory()
  #closing = false

  /** Spawns bash and starts its init script. */
  constructor(options: BashSessionOptions) {
    this.#opts = resolveSessionOptions(options)
    this.id = options.id
    this.cwd = options.cwd
    this.commandTimeoutMs = options.commandTimeoutMs
    this.cleanEnv = options.cleanEnv ?? false
    this.createdAt = options.clock.now()
    this.log = new OutputLog(
      this.#opts.scrollbackBytes,
      (full) => this.#bash.setPaused(full),
      this.#opts.scrollbackBudget,
    )
    this.ready = new Promise((resolve, reject) => {
      this.#resolveReady = resolve
      this.#rejectReady = reject
    })
    this.ready.catch(() => {})
    this.closed = new Promise((resolve) => {
      this.#resolveClosed = resolve
    })
    this.#files = new SessionFiles(this.#opts.tempRoot, this.#opts.sandboxGid)
    this.#stopper = this.#newStopper()
    this.#scanners = { stdout: new MarkerScanner('with-code'), stderr: new MarkerScanner('plain') }
    this.#initNonce = newNonce()
    for (const s of STREAMS) this.#scanners[s].expect(this.#initNonce)

    const initFile = this.#files.writeInit(this.#framing.initScript(this.#files.commandPrefix))
    const opts = this.#opts
    this.#bash = new BashProcess(
      { spawn: opts.spawn, bashPath: opts.bashPath, cwd: this.cwd, env: opts.env, clock: opts.clock },
      {
        onChunk: (stream, chunk) => this.#onChunk(stream, chunk),
        onExit: (info, startError) => {
          if (startError !== undefined)
            opts.logger.warn({ sessionId: this.id, err: startError.message }, 'bash could not be started')
          void this.#close(info)
        },
      },
    )
    this.#bash.write(this.#framing.initLine(initFile, this.#initNonce))
  }

  /**
   * Makes a spare shell (started ahead of any request, nothing run in it yet) the session
   * `id`, created now.
   */
  adopt(id: string): void {
    this.id = id
    this.createdAt = this.#opts.clock.now()
  }

  /** Whether bash runs and is not being closed. */
  get open(): boolean {
    return this.#closedInfo === null && !this.#closing
  }

  /** bash's process id while it runs. */
  get pid(): number | null {
    return this.#closedInfo === null ? (this.#bash.pid ?? null) : null
  }

  /** How the shell closed, once it has. */
  get closedInfo(): ShellClosedInfo | null {
    return this.#closedInfo
  }

  /** The id of the run in progress. */
  get running(): string | null {
    return this.#active?.req.runId ?? null
  }

  /** Runs waiting behind the active one (written ahead into bash or not). */
  get queued(): number {
    return this.#queue.size + this.#window.size - (this.#active === null ? 0 : 1)
  }

  /** The exit code of the last finished run (what `$?` holds in the shell). */
  get lastExitCode(): number {
    return this.#lastExitCode
  }

  /** Queues a run; resolves with its buffered result, rejects with ShellClosedError if bash ends. */
  run(req: RunRequest): Promise<RunOutcome> {
    if (this.#closedInfo !== null || this.#closing) {
      return Promise.reject(new ShellClosedError(this.id, this.#closedInfo ?? describeExit(null, 'SIGKILL')))
    }
    const invalid = checkRunRequest(this.id, req, this.#opts.maxCommandBytes, this.#inFlight)
    if (invalid !== null) return Promise.reject(invalid)
    this.#inFlight.add(req.runId)
    return new Promise<RunOutcome>((resolve, reject) => {
      const cap = req.outputCapBytes ?? this.#opts.outputCapBytes
      this.#queue.push(newRun(req, cap, resolve, reject))
      this.#fill()
    })
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

  /** Memory the history counts against `HISTORY_MAX_BYTES`. */
  get historyBytes(): number {
    return this.#history.bytes
  }

  /** Every history entry matching the query, oldest first. */
  history(query: HistoryQuery = {}): HistoryEntry[] {
    return this.#history.query(query)
  }

  /**
   * Puts back what a snapshot kept of this shell outside bash: its history (indexes
   * included, and they must be consecutive) and `$?`. Call before the first run.
   */
  restoreFromSnapshot(history: readonly HistoryEntry[], lastExitCode: number): void {
    this.#history.load(history)
    this.#lastExitCode = lastExitCode
  }

  /** One history entry by index, or null. */
  historyEntry(index: number): HistoryEntry | null {
    return this.#history.entry(index)
  }

  /** The name of a helper function defined in the shell (`env` or `alias` listing). */
  helperName(kind: 'env' | 'alias'): string {
    return this.#framing.helperName(kind)
  }

  /**
   * Hangs up bash as closing a terminal does (SIGHUP, so its EXIT trap runs, for at most the
   * kill grace period), then kills bash and every process in its session and reports the
   * shell closed.
   */
  async dispose(reason = 'session deleted'): Promise<ShellClosedInfo> {
    if (this.#closedInfo !== null) return this.#closedInfo
    if (this.#phase === 'ready' && !this.#closing) await this.#bash.hangUp(this.#opts.killGraceMs)
    this.#bash.kill(this.#opts.processTable)
    await this.#close({ code: null, signal: 'SIGKILL', reason })
    return this.#closedInfo ?? { code: null, signal: 'SIGKILL', reason }
  }

  /** Writes to (or ends) the stdin pipe of run `runId`, which must be running with `stdinPipe`. */
  writeStdin(runId: string, bytes: Uint8Array | undefined, end: boolean): void {
    const pipe = this.#active?.req.runId === runId ? this.#stdinPipe : null
    if (!pipe) {
      throw new AgentError(
        'BAD_REQUEST',
        `run "${runId}" in session "${this.id}" is not running with a stdin pipe; start it with stdin: 'pipe' and write once it has started`,
      )
    }
    if (bytes !== undefined && bytes.byteLength > 0) pipe.write(bytes)
    if (end) pipe.end()
  }

  /** Disposes the session (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose()
  }

  /**
   * Writes queued runs into bash in one write, up to the window, unless an interrupt is being
   * settled, and starts the first if nothing is active.
   */
  #fill(): void {
    if (this.#phase !== 'ready' || this.#pendingSync !== null || this.#active?.sync) return
    let lines = ''
    for (let run = this.#queue.peek(); run !== undefined; run = this.#queue.peek()) {
      if (!this.#window.canWrite(run) || this.#window.runs.some((r) => r.held)) break
      this.#queue.take()
      lines += this.#writeLine(run)
    }
    if (lines.length === 0) return
    this.#bash.write(lines)
    this.#advance()
  }

  /** Prepares a run's files and nonce, adds it to the window and returns its line. */
  #writeLine(run: Run): string {
    run.nonce = newNonce()
    for (const s of STREAMS) this.#scanners[s].expect(run.nonce)
    this.#window.add(run)
    let text = run.command
    // Internal runs are written only into an empty window, so `$?` is final here.
    if (run.req.internal === true) text += `\n\\builtin return ${this.#lastExitCode}\n`
    this.#files.writeCommand(run.slot, text)
    let stdinRedirect = '/dev/null'
    if (run.req.stdinPipe === true) {
      // A stdin-pipe run is alone in the window, so it is the next active run.
      this.#stdinPipe = new RunStdinPipe(
        this.#files.dir,
        run.req.runId,
        this.#opts.sandboxGid,
        this.#bash.pid,
      )
      stdinRedirect = shellQuote(this.#stdinPipe.path)
    } else if (run.req.stdin !== undefined) {
      stdinRedirect = shellQuote(this.#files.writeStdin(run.slot, run.req.stdin))
    }
    return this.#framing.runLine(
      this.#files.commandPath(run.slot),
      stdinRedirect,
      run.nonce,
      run.req.internal,
    )
  }

  /** Makes a run the active one: its start is logged and recorded, its timeout starts. */
  #activate(run: Run): void {
    const clock = this.#opts.clock
    this.#active = run
    run.activated = true
    run.startedAtMs = clock.monotonicMs()
    run.startTicks = this.#opts.processTable.nowTicks()
    run.startOffset = this.log.endOffset
    if (run.req.internal !== true) {
      this.log.appendRunStart(run.req.runId)
      run.history = this.#history.record(run.req.command, clock.now())
    }
    const timeoutMs = run.req.timeoutMs ?? this.commandTimeoutMs
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
            this.#reset(run)
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
    }
  }

  /** Returns a run whose line ran nothing to its queued state. */
  #reset(run: Run): void {
    for (const s of STREAMS) this.#forget(s, run.nonce)
    // Output that came before its held marker was not its own (a background job's, say).
    if (run.early !== null)
      for (const s of STREAMS) for (const b of run.early[s]) this.log.appendData(s, null, b)
    run.nonce = ''
    run.done = { stdout: false, stderr: false }
    run.exitCode = null
    run.held = false
    run.heldSeen = false
    run.early = null
  }

  #onChunk(stream: StreamName, chunk: Buffer): void {
    for (const item of this.#scanners[stream].push(chunk)) {
      if (item.kind === 'data') this.#deliver(stream, item.bytes)
      else this.#onMarker(stream, item.nonce, item.exitCode)
    }
    this.#fill()
  }

  #deliver(stream: StreamName, bytes: Buffer): void {
    if (bytes.length === 0 || this.#phase === 'starting') return
    const run = this.#window.owner(stream)
    if (run === undefined) {
      this.log.appendData(stream, null, bytes)
      return
    }
    if (!run.activated) {
      run.early ??= { stdout: [], stderr: [] }
      run.early[stream].push(bytes)
      return
    }
    this.#append(run, stream, bytes)
  }

  /** Output of the active run: to its buffered result and, unless internal, the log. */
  #append(run: Run, stream: StreamName, bytes: Buffer): void {
    run.out[stream].append(bytes)
    if (run.req.internal !== true) this.log.appendData(stream, run.req.runId, bytes)
  }

  #forget(stream: StreamName, nonce: string): void {
    this.#deliver(stream, this.#scanners[stream].forget(nonce))
  }

  #onMarker(stream: StreamName, nonce: string, exitCode: number | null): void {
    if (this.#phase === 'starting' && nonce === this.#initNonce) {
      this.#initSeen[stream] = true
      this.#scanners[stream].forget(nonce)
      if (this.#initSeen.stdout && this.#initSeen.stderr) {
        this.#phase = 'ready'
        this.#resolveReady()
        this.#fill()
      }
      return
    }
    const index = this.#window.indexOf(nonce)
    if (index >= 0) {
      this.#window.markEnded(index, stream, exitCode, HELD_CODE)
      this.#advance()
      return
    }
    const run = this.#active
    const runSync = run?.sync ?? null
    if (run !== null && runSync !== null && (nonce === runSync.nonce || runSync.stale.includes(nonce))) {
      // The sync line was written behind every line in the window.
      this.#window.markAllEnded(stream)
      if (nonce === runSync.nonce) runSync.seen[stream] = true
      this.#forget(stream, nonce)
      this.#advance()
      return
    }
    const sync = this.#pendingSync
    if (sync?.stale.includes(nonce)) {
      this.#window.markAllEnded(stream)
      this.#forget(stream, nonce)
      this.#advance()
    } else if (sync !== null && nonce === sync.nonce) {
      this.#window.markAllEnded(stream)
      sync.seen[stream] = true
      this.#forget(stream, nonce)
      if (sync.seen.stdout && sync.seen.stderr) {
        // bash runs lines in order: an older sync line still unanswered was aborted.
        this.#forgetAll(sync.stale)
        this.#pendingSync = null
      }
      this.#advance()
    }
  }

  #finish(run: Run): void {
    if (this.#active !== run) return
    this.#opts.clock.clearTimer(run.timer)
    for (const s of STREAMS) this.#forget(s, run.nonce)
    this.#window.shift()
    this.#active = null
    this.#stdinPipe?.close()
    this.#stdinPipe = null
    this.#inFlight.delete(run.req.runId)
    const sync = run.sync
    if (sync !== null && !(sync.seen.stdout && sync.seen.stderr)) {
      // The run is no longer active, so nothing else touches its sync line from here on.
      this.#pendingSync = sync
      this.#stopper.watchSync(sync)
    } else if (sync !== null) {
      this.#forgetAll(sync.stale)
    }
    const exitCode = run.exitCode ?? 130
    const oomKilled = this.#opts.oomCheck(exitCode)
    this.#lastExitCode = exitCode
    const durationMs = this.#opts.clock.monotonicMs() - run.startedAtMs
    if (run.history !== null) {
      run.history.exitCode = exitCode
      run.history.durationMs = durationMs
    }
    if (run.req.internal !== true) {
      this.log.appendRunExit({
        id: run.req.runId,
        code: exitCode,
        timedOut: run.timedOut,
        durationMs,
        ...(oomKilled ? { oomKilled } : {}),
      })
    }
    const { stdout, stderr } = run.out
    run.resolve({
      runId: run.req.runId,
      exitCode,
      timedOut: run.timedOut,
      interrupted: run.interrupted,
      oomKilled,
      stdout: stdout.bytes(),
      stderr: stderr.bytes(),
      stdoutBytes: stdout.totalBytes,
      stderrBytes: stderr.totalBytes,
      truncated: stdout.truncated || stderr.truncated,
      durationMs,
      startOffset: run.startOffset,
      endOffset: this.log.endOffset,
    })
  }

  /** The interrupt and timeout procedures, with what they need of this session. */
  #newStopper(): RunStopper {
    const session = this
    const opts = this.#opts
    return new RunStopper({
      get sessionId() {
        return session.id
      },
      get bashPid() {
        return session.#bash.pid
      },
      get closed() {
        return session.#closedInfo !== null
      },
      get pendingSync() {
        return session.#pendingSync
      },
      processTable: opts.processTable,
      clock: opts.clock,
      logger: opts.logger,
      killGraceMs: opts.killGraceMs,
      isActive: (run) => this.#active === run,
      holdLinesBehind: (run) => this.#holdLinesBehind(run),
      writeSync: (nonce) => {
        for (const s of STREAMS) this.#scanners[s].expect(nonce)
        this.#bash.write(this.#framing.syncLine(nonce))
      },
      finishStopped: (run) => {
        this.#finish(run)
        this.#advance()
        this.#fill()
      },
      killBash: (reason) => this.#close({ code: null, signal: 'SIGKILL', reason }),
    })
  }

  /**
   * Holds the command files of the lines written behind `run`, before any SIGINT: a line bash
   * has not reached then runs nothing (a SIGINT meant for `run` can no longer stop a later
   * command) and its run is written again once the interrupt has settled.
   */
  #holdLinesBehind(run: Run): void {
    for (const later of this.#window.runs) {
      if (later === run || later.held) continue
      this.#files.holdCommand(later.slot, this.#framing.heldBody())
      later.held = true
    }
  }

  #forgetAll(nonces: readonly string[]): void {
    for (const nonce of nonces) for (const s of STREAMS) this.#forget(s, nonce)
  }

  async #close(info: ShellClosedInfo): Promise<void> {
    if (this.#closedInfo !== null || this.#closing) return
    this.#closing = true
    for (const s of STREAMS) this.#deliver(s, this.#scanners[s].flush())
    this.#closedInfo = info
    this.#phase = 'closed'
    this.#opts.logger.info({ sessionId: this.id, ...info }, 'shell closed')
    const err = new ShellClosedError(this.id, info)
    const active = this.#active
    this.#active = null
    this.#stdinPipe?.close()
    this.#stdinPipe = null
    if (active !== null) {
      this.#opts.clock.clearTimer(active.timer)
      active.wake?.()
      if (active.history !== null)
        active.history.durationMs = this.#opts.clock.monotonicMs() - active.startedAtMs
      active.reject(err)
    }
    for (const run of this.#window.clear()) if (run !== active) run.reject(err)
    for (const run of this.#heldBack.splice(0)) run.reject(err)
    for (let run = this.#queue.take(); run !== undefined; run = this.#queue.take()) run.reject(err)
    this.#inFlight.clear()
    this.#rejectReady(err)
    this.log.appendClosed(info)
    this.#resolveClosed(info)
    this.#bash.destroy()
    this.#files.remove()
  }
}
