// One long-lived bash process and the runs it executes.
//
// Model:
// - bash runs as `bash --noprofile --norc --noediting -i`, its stdin a Unix stream socket and
//   its stdout and stderr pipes (child-stdio.ts), as the leader of its own session. Interactive mode makes SIGINT abort the
//   current command line (even a loop of builtins) while bash survives. An init script clears
//   prompts and history, saves copies of stdout/stderr on fds 62/63, and defines a read-only end
//   function. Everything bash prints before the init markers (job-control warnings, a prompt) is
//   discarded.
// - A run writes its command to a private file and sends one short line:
//   `. 'file' </dev/null 2>&63; __conch_end_<tag> $? <nonce> && :`. Sourcing keeps state changes
//   in the shell and keeps `[1] pid` notices and `exit` echoes out of the output. The end
//   function prints a marker with the run's random nonce and `$?` on fd 62 and a marker with
//   the nonce on fd 63, then returns `$?` so the next run sees it.
// - Runs form a FIFO queue. Up to a window of lines are written ahead into bash's stdin
//   (run-window.ts), so bash starts the next run without waiting for the agent; a run becomes
//   active (its start is logged, its timeout starts) when the line before it has ended.
// - Interrupt and timeout first hold the command files of lines written behind the run (they
//   then run nothing and say so, and their runs go back to the head of the queue), then send
//   SIGINT to bash and to the run's processes, and a "sync" line calling the end function with
//   a second nonce, because SIGINT aborts the whole line, including the run's own end call.
//   A stream of the run ends at the first marker of its own, of a later line or of the sync
//   line; nothing new is written until the sync markers arrive. A timeout escalates to
//   SIGTERM and SIGKILL on the run's processes, and kills bash only when bash never answers.
// - Output is attributed to the first line whose marker has not arrived on its stream, or to
//   no run between runs, and recorded in the session's output log. A full log subscriber
//   pauses reading bash's stdout and stderr.
// - Closing the session hangs bash up first (SIGHUP, as closing a terminal does, so its EXIT
//   trap runs), then kills bash and every process in its session.
import type { HistoryEntry, ShellClosedInfo, StreamName } from '@conch/protocol'
import { ShellClosedError } from './agent-error.ts'
import { BashProcess } from './bash-process.ts'
import {
  type BashSessionOptions,
  describeExit,
  type ResolvedSessionOptions,
  resolveSessionOptions,
} from './bash-session-options.ts'
import { FramingLines, newNonce } from './framing-lines.ts'
import { MarkerScanner } from './marker-scanner.ts'
import { OutputLog } from './output-log.ts'
import { SessionFiles } from './session-files.ts'
import { type HistoryQuery, SessionHistory } from './session-history.ts'
import type { RunOutcome, RunRequest } from './session-run.ts'
import { type RunsHost, SessionRuns } from './session-runs.ts'

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
  readonly #runs: SessionRuns
  readonly #history = new SessionHistory()
  #phase: Phase = 'starting'
  #initNonce: string
  #initSeen: Record<StreamName, boolean> = { stdout: false, stderr: false }
  #closedInfo: ShellClosedInfo | null = null
  #resolveReady: () => void = () => {}
  #rejectReady: (err: Error) => void = () => {}
  #resolveClosed: (info: ShellClosedInfo) => void = () => {}
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
    this.#scanners = { stdout: new MarkerScanner('with-code'), stderr: new MarkerScanner('plain') }
    this.#initNonce = newNonce()
    for (const s of STREAMS) this.#scanners[s].expect(this.#initNonce)
    this.#runs = new SessionRuns(this.#runsHost())

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

  /** Queues a run; resolves with its buffered result, rejects with ShellClosedError if bash ends. */
  run(req: RunRequest): Promise<RunOutcome> {
    if (this.#closedInfo !== null || this.#closing) {
      return Promise.reject(new ShellClosedError(this.id, this.#closedInfo ?? describeExit(null, 'SIGKILL')))
    }
    return this.#runs.add(req)
  }

  /**
   * Queues a run without a promise: `resolve` gets its buffered result, `reject` the error that
   * ends it (the shell closing). A closed shell or an invalid request throws its typed error
   * here, and nothing is queued.
   */
  enqueue(req: RunRequest, resolve: (outcome: RunOutcome) => void, reject: (err: Error) => void): void {
    if (this.#closedInfo !== null || this.#closing)
      throw new ShellClosedError(this.id, this.#closedInfo ?? describeExit(null, 'SIGKILL'))
    this.#runs.enqueue(req, resolve, reject)
  }

  /**
   * Does what Ctrl-C does to the active run (optionally only if it is `runId`): SIGINT to
   * bash and to the run's processes. Returns whether a run was interrupted.
   */
  interrupt(runId?: string): boolean {
    return this.#runs.interrupt(runId)
  }

  /** Writes to (or ends) the stdin pipe of run `runId`, which must be running with `stdinPipe`. */
  writeStdin(runId: string, bytes: Uint8Array | undefined, end: boolean): void {
    this.#runs.writeStdin(runId, bytes, end)
  }

  /** The id of the run in progress. */
  get running(): string | null {
    return this.#runs.running
  }

  /** Runs waiting behind the active one (written ahead into bash or not). */
  get queued(): number {
    return this.#runs.queued
  }

  /** The exit code of the last finished run (what `$?` holds in the shell). */
  get lastExitCode(): number {
    return this.#runs.lastExitCode
  }

  /** Memory the history counts against `HISTORY_MAX_BYTES`. */
  get historyBytes(): number {
    return this.#history.bytes
  }

  /** Every history entry matching the query, oldest first. */
  history(query: HistoryQuery = {}): HistoryEntry[] {
    return this.#history.query(query)
  }

  /** One history entry by index, or null. */
  historyEntry(index: number): HistoryEntry | null {
    return this.#history.entry(index)
  }

  /**
   * Puts back what a snapshot kept of this shell outside bash: its history (indexes
   * included, and they must be consecutive) and `$?`. Call before the first run.
   */
  restoreFromSnapshot(history: readonly HistoryEntry[], lastExitCode: number): void {
    this.#history.load(history)
    this.#runs.lastExitCode = lastExitCode
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

  /** Disposes the session (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose()
  }

  #onChunk(stream: StreamName, chunk: Buffer): void {
    for (const item of this.#scanners[stream].push(chunk)) {
      if (item.kind === 'data') {
        // What bash prints before the init markers (job-control warnings, a prompt) is dropped.
        if (this.#phase !== 'starting') this.#runs.deliver(stream, item.bytes)
      } else if (this.#phase === 'starting' && item.nonce === this.#initNonce) {
        this.#onInitMarker(stream)
      } else {
        this.#runs.onMarker(stream, item.nonce, item.exitCode)
      }
    }
    this.#runs.fill()
  }

  #onInitMarker(stream: StreamName): void {
    this.#initSeen[stream] = true
    this.#scanners[stream].forget(this.#initNonce)
    if (this.#initSeen.stdout && this.#initSeen.stderr) {
      this.#phase = 'ready'
      this.#resolveReady()
    }
  }

  /** The runs' view of this session. */
  #runsHost(): RunsHost {
    const session = this
    return {
      get sessionId() {
        return session.id
      },
      opts: this.#opts,
      commandTimeoutMs: this.commandTimeoutMs,
      log: this.log,
      files: this.#files,
      framing: this.#framing,
      scanners: this.#scanners,
      history: this.#history,
      get bash() {
        return session.#bash
      },
      get ready() {
        return session.#phase === 'ready'
      },
      get closed() {
        return session.#closedInfo !== null
      },
      close: (info) => this.#close(info),
    }
  }

  async #close(info: ShellClosedInfo): Promise<void> {
    if (this.#closedInfo !== null || this.#closing) return
    this.#closing = true
    for (const s of STREAMS) this.#runs.deliver(s, this.#scanners[s].flush())
    this.#closedInfo = info
    this.#phase = 'closed'
    this.#opts.logger.info({ sessionId: this.id, ...info }, 'shell closed')
    const err = new ShellClosedError(this.id, info)
    this.#runs.closeAll(err)
    this.#rejectReady(err)
    this.log.appendClosed(info)
    this.#resolveClosed(info)
    this.#bash.destroy()
    this.#files.remove()
  }
}
