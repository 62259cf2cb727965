// The bash process of one session: `bash --noprofile --norc --noediting -i`, its stdin a Unix
// stream socket (libuv's child stdio) and its stdout and stderr pipes (child-stdio.ts, through
// the spawn), as the leader of its own session. It reports output chunks as
// they arrive and its exit once the output still in its pipes has been read (or a short
// drain time passed); it can be paused (a full log subscriber), hung up as closing a terminal
// does, and killed with its session.
import type { Readable } from 'node:stream'
import type { ShellClosedInfo, StreamName } from '@conch/protocol'
import { describeExit } from './bash-session-options.ts'
import { type Clock, delay } from './clock.ts'
import { readPipeIntoPool } from './pooled-pipe-reads.ts'
import { type ProcessTable, sendSignal } from './process-tree.ts'
import { SHARED_READ_BUFFERS } from './read-buffer-pool.ts'
import type { Spawn } from './spawner.ts'

const STREAMS: readonly StreamName[] = ['stdout', 'stderr']
/** How long output may keep arriving after bash exited before the exit is reported. */
const EXIT_DRAIN_MS = 50

/** How the process is started. */
export interface BashProcessOptions {
  spawn: Spawn
  bashPath: string
  cwd: string
  env: Record<string, string>
  clock: Clock
}

/** What the process reports. */
export interface BashProcessEvents {
  /**
   * Bytes from one of bash's output sockets: possibly a view into a pooled read buffer, valid past
   * this call only for a holder of its lease (`leaseOf`); anything else that keeps it copies it.
   */
  onChunk(stream: StreamName, chunk: Buffer): void
  /** bash could not start (`startError`) or exited on its own; reported once, not after `hangUp`. */
  onExit(info: ShellClosedInfo, startError?: Error): void
}

/** One session's bash process. */
export class BashProcess {
  readonly #child: ReturnType<Spawn>
  readonly #clock: Clock
  readonly #ended: Record<StreamName, boolean> = { stdout: false, stderr: false }
  #exitWaiter: (() => void) | null = null
  /** Set while `hangUp` runs: the exit is then its caller's to report. */
  #hangingUp = false
  /** Lines written in this task after its first write, not yet in bash's stdin; null: none yet. */
  #pending: string | null = null

  /** Spawns bash. */
  constructor(options: BashProcessOptions, events: BashProcessEvents) {
    this.#clock = options.clock
    const child = options.spawn(options.bashPath, ['--noprofile', '--norc', '--noediting', '-i'], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    })
    this.#child = child
    child.on('error', (err) =>
      events.onExit({ code: null, signal: null, reason: `bash could not be started: ${err.message}` }, err),
    )
    child.on('exit', (code, signal) => {
      if (this.#hangingUp) return
      void this.#drain().then(() => events.onExit(describeExit(code, signal)))
    })
    child.stdin?.on('error', () => {})
    for (const s of STREAMS) {
      const stream = child[s] as Readable | null
      if (stream === null || stream === undefined) continue
      // Into pooled buffers where this Node allows (see pooled-pipe-reads.ts), else Node's own.
      const onRead = (chunk: Buffer) => events.onChunk(s, chunk)
      if (!readPipeIntoPool(stream, SHARED_READ_BUFFERS, onRead)) stream.on('data', onRead)
      stream.on('end', () => this.#onEnd(s))
      stream.on('error', () => this.#onEnd(s))
    }
  }

  /** bash's pid, once spawned. */
  get pid(): number | undefined {
    return this.#child.pid
  }

  /** Whether bash has exited. */
  get exited(): boolean {
    return this.#child.exitCode !== null || this.#child.signalCode !== null
  }

  /**
   * Writes lines to bash's stdin. The first write of a task goes at once (a lone run waits for
   * nothing); later ones in the same task wait for its end and go in one write, so the runs of
   * one link read cost two writes into bash, not one each. A write into bash's stdin costs a
   * wake-up of bash, the most expensive part of queueing a run; the bytes keep their order.
   */
  write(text: string): void {
    if (this.#pending !== null) {
      this.#pending += text
      return
    }
    this.#pending = ''
    queueMicrotask(this.#flush)
    this.#child.stdin?.write(text)
  }

  readonly #flush = (): void => {
    const text = this.#pending
    this.#pending = null
    if (text) this.#child.stdin?.write(text)
  }

  /** Stops (or resumes) reading bash's stdout and stderr. */
  setPaused(paused: boolean): void {
    for (const s of STREAMS) {
      const stream = this.#child[s] as Readable | null
      if (paused) stream?.pause()
      else stream?.resume()
    }
  }

  /** SIGHUP to bash, then waits until it exits or `graceMs` ends; its exit is not reported. */
  async hangUp(graceMs: number): Promise<void> {
    const pid = this.#child.pid
    if (pid === undefined || this.exited) return
    this.#hangingUp = true
    const exited = new Promise<void>((resolve) => this.#child.once('exit', () => resolve()))
    sendSignal(pid, 'SIGHUP')
    await Promise.race([exited, delay(this.#clock, graceMs)])
  }

  /** SIGKILL to bash and every process in its session. */
  kill(processTable: ProcessTable): void {
    const pid = this.#child.pid
    if (pid === undefined) return
    const members = processTable.sessionMembers(pid, pid)
    sendSignal(pid, 'SIGKILL')
    processTable.signal(members, 'SIGKILL')
  }

  /** Closes bash's stdio sockets. */
  destroy(): void {
    this.#child.stdin?.destroy()
    this.#child.stdout?.destroy()
    this.#child.stderr?.destroy()
  }

  /** Lets output still in the sockets arrive, for at most EXIT_DRAIN_MS. */
  async #drain(): Promise<void> {
    if (this.#ended.stdout && this.#ended.stderr) return
    this.setPaused(false)
    await Promise.race([
      new Promise<void>((resolve) => {
        this.#exitWaiter = resolve
      }),
      delay(this.#clock, EXIT_DRAIN_MS),
    ])
  }

  #onEnd(stream: StreamName): void {
    this.#ended[stream] = true
    if (this.#ended.stdout && this.#ended.stderr) this.#exitWaiter?.()
  }
}
