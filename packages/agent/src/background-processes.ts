// The sandbox's background processes (servers, watchers, long builds).
//
// Model: each process is `bash -c command` leading its own process group, with an output log
// (the same bounded, offset-addressed log a shell has) that pollers read "since an offset" and
// streams subscribe to with backpressure. Kill sends SIGTERM to the group and SIGKILL after
// `LIMITS.processKillGraceMs`. The final status is decided by how the child really ended: a
// process that exited on its own before a kill's signal reached it is `exited` with its code,
// even if a kill was requested.
import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import type { ProcessInfo } from '@conch/protocol'
import { LIMITS } from '@conch/protocol/zod-free'
import { AgentError } from './agent-error.ts'
import { exitCodeOf, signalGroup } from './child-exit.ts'
import type { Clock } from './clock.ts'
import { isOutput } from './log-records.ts'
import { type LogListener, type LogSubscription, OutputLog } from './output-log.ts'
import type { ScrollbackBudget } from './scrollback-budget.ts'
import type { Spawn } from './spawner.ts'

/** How to start one background process (paths and env already resolved). */
export interface ProcessStart {
  /** Command text for `bash -c`. */
  command: string
  /** Host working directory. */
  cwd: string
  /** The complete environment. */
  env: Record<string, string>
}

interface Entry {
  info: ProcessInfo
  request: ProcessStart
  child: ChildProcess
  log: OutputLog
  killRequested: boolean
  killTimer: unknown
  ended: Promise<void>
}

/** Output since an offset, as bytes. */
export interface ProcessOutputBytes {
  /** stdout bytes since the offset. */
  stdout: Buffer
  /** stderr bytes since the offset. */
  stderr: Buffer
  /** Offset to poll from next time. */
  nextOffset: number
  /** Status at the time of the answer. */
  status: ProcessInfo['status']
}

/** Every background process of one sandbox. */
/**
 * Finished processes kept for `get`, `output` and `wait`, at most, and the most their command
 * texts may take together (two bytes per UTF-16 unit plus an entry's overhead); the oldest
 * finished go first. Running processes are bounded by `maxProcesses`.
 */
const MAX_FINISHED_PROCESSES = 64
const MAX_FINISHED_BYTES = 1024 * 1024
const FINISHED_ENTRY_OVERHEAD_BYTES = 1024

/** What a finished entry counts for against `MAX_FINISHED_BYTES`. */
function finishedBytes(entry: Entry): number {
  return FINISHED_ENTRY_OVERHEAD_BYTES + 2 * entry.info.command.length
}

export class BackgroundProcesses {
  readonly #spawn: Spawn
  readonly #clock: Clock
  readonly #maxProcesses: number
  readonly #logBytes: number
  readonly #budget: ScrollbackBudget | undefined
  readonly #entries = new Map<string, Entry>()
  /** Finished entries, oldest first, and what they count for. */
  readonly #finished = new Set<Entry>()
  #finishedBytes = 0

  /**
   * Uses `spawn` and `clock`; keeps at most `maxProcesses` running and `logBytes` of output each,
   * within `budget` when given.
   */
  constructor(
    spawn: Spawn,
    clock: Clock,
    maxProcesses: number = LIMITS.maxProcessesPerSandbox,
    logBytes: number = LIMITS.scrollbackBytes,
    budget?: ScrollbackBudget,
  ) {
    this.#spawn = spawn
    this.#clock = clock
    this.#maxProcesses = maxProcesses
    this.#logBytes = logBytes
    this.#budget = budget
  }

  /** Processes known (running and finished). */
  get size(): number {
    return this.#entries.size
  }

  /** Starts a process. */
  start(request: ProcessStart): ProcessInfo {
    const running = [...this.#entries.values()].filter((e) => e.info.status === 'running').length
    if (running >= this.#maxProcesses) {
      throw new AgentError(
        'TOO_MANY_PROCESSES',
        `this sandbox already runs ${running} background processes (the limit)`,
        { details: { limit: this.#maxProcesses, value: running } },
      )
    }
    const child = this.#spawn('bash', ['-c', request.command], {
      cwd: request.cwd,
      env: request.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const log = new OutputLog(
      this.#logBytes,
      (full) => {
        if (full) {
          child.stdout?.pause()
          child.stderr?.pause()
        } else {
          child.stdout?.resume()
          child.stderr?.resume()
        }
      },
      this.#budget,
    )
    const info: ProcessInfo = {
      id: `proc_${randomBytes(8).toString('hex')}`,
      pid: child.pid ?? -1,
      command: request.command,
      status: 'running',
      exitCode: null,
      signal: null,
      startedAt: this.#clock.now(),
      endedAt: null,
      offset: 0,
    }
    child.stdout?.on('data', (chunk: Buffer) => log.appendData('stdout', null, chunk))
    child.stderr?.on('data', (chunk: Buffer) => log.appendData('stderr', null, chunk))
    const entry: Entry = {
      info,
      request,
      child,
      log,
      killRequested: false,
      killTimer: undefined,
      ended: new Promise((resolve) => {
        const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
          if (info.status !== 'running') return
          if (entry.killTimer !== undefined) this.#clock.clearTimer(entry.killTimer)
          info.status = signal !== null && entry.killRequested ? 'killed' : 'exited'
          info.exitCode = exitCodeOf(code, signal)
          info.signal = signal
          info.endedAt = this.#clock.now()
          log.appendRunExit({
            id: info.id,
            code: info.exitCode,
            timedOut: false,
            durationMs: info.endedAt - info.startedAt,
          })
          this.#noteFinished(entry)
          resolve()
        }
        child.on('error', () => finish(127, null))
        child.on('close', finish)
      }),
    }
    this.#entries.set(info.id, entry)
    return this.#snapshot(entry)
  }

  /** Every process, oldest first. */
  list(): ProcessInfo[] {
    return [...this.#entries.values()].map((e) => this.#snapshot(e))
  }

  /** How each process still known was started, and whether it still runs (for a snapshot's list). */
  startRequests(): Array<ProcessStart & { running: boolean }> {
    return [...this.#entries.values()].map((e) => ({ ...e.request, running: e.info.status === 'running' }))
  }

  /** One process. */
  get(id: string): ProcessInfo {
    return this.#snapshot(this.#entry(id))
  }

  /** Output written since `since` (default: everything still held). */
  output(id: string, since?: number): ProcessOutputBytes {
    const entry = this.#entry(id)
    const stdout: Buffer[] = []
    const stderr: Buffer[] = []
    for (const event of entry.log.readFrom(since ?? entry.log.startOffset)) {
      if (isOutput(event)) (event.type === 'shell_out' ? stdout : stderr).push(event.data)
    }
    return {
      stdout: Buffer.concat(stdout),
      stderr: Buffer.concat(stderr),
      nextOffset: entry.log.endOffset,
      status: entry.info.status,
    }
  }

  /**
   * Replays output from `since` and subscribes to what follows. The listener sees a `shell_exit`
   * event (with the process id as run id) when the process ends.
   */
  subscribe(
    id: string,
    since: number | undefined,
    listener: LogListener,
  ): { replay: ReturnType<OutputLog['readFrom']>; subscription: LogSubscription; info: ProcessInfo } {
    const entry = this.#entry(id)
    const { replay, subscription } = entry.log.subscribe(since ?? entry.log.startOffset, listener)
    return { replay, subscription, info: this.#snapshot(entry) }
  }

  /** Sends `signal` (default SIGTERM) to the process group, then SIGKILL after the grace period. */
  kill(id: string, signal: NodeJS.Signals = 'SIGTERM'): ProcessInfo {
    const entry = this.#entry(id)
    if (entry.info.status !== 'running') return this.#snapshot(entry)
    entry.killRequested = true
    signalGroup(entry.info.pid, signal)
    if (signal !== 'SIGKILL' && entry.killTimer === undefined) {
      entry.killTimer = this.#clock.setTimer(LIMITS.processKillGraceMs, () =>
        signalGroup(entry.info.pid, 'SIGKILL'),
      )
    }
    return this.#snapshot(entry)
  }

  /** Resolves when the process has ended, or after `timeoutMs` with it still running. */
  async wait(id: string, timeoutMs?: number): Promise<ProcessInfo> {
    const entry = this.#entry(id)
    if (timeoutMs === undefined) {
      await entry.ended
    } else {
      let timer: unknown
      await Promise.race([
        entry.ended,
        new Promise<void>((resolve) => (timer = this.#clock.setTimer(timeoutMs, resolve))),
      ])
      this.#clock.clearTimer(timer)
    }
    return this.#snapshot(entry)
  }

  /** Kills every process group (agent shutdown or sandbox destroy). */
  killAll(): void {
    for (const entry of this.#entries.values()) {
      if (entry.info.status === 'running') signalGroup(entry.info.pid, 'SIGKILL')
    }
  }

  /** Keeps a finished entry and forgets the oldest finished ones past the bounds. */
  #noteFinished(entry: Entry): void {
    this.#finished.add(entry)
    this.#finishedBytes += finishedBytes(entry)
    for (const old of this.#finished) {
      if (this.#finished.size <= MAX_FINISHED_PROCESSES && this.#finishedBytes <= MAX_FINISHED_BYTES) break
      if (old === entry) break
      this.#finished.delete(old)
      this.#finishedBytes -= finishedBytes(old)
      this.#entries.delete(old.info.id)
      old.log.closeSubscribers()
      old.log.release()
    }
  }

  #entry(id: string): Entry {
    const entry = this.#entries.get(id)
    if (!entry) {
      throw new AgentError(
        'PROCESS_NOT_FOUND',
        `no background process "${id.slice(0, 80)}" in this sandbox`,
        {
          details: {
            processId: id.slice(0, 80),
          },
        },
      )
    }
    return entry
  }

  #snapshot(entry: Entry): ProcessInfo {
    return { ...entry.info, offset: entry.log.endOffset }
  }
}
