// Finds and signals the processes that belong to one run of a bash session, from /proc.
//
// Model: every session's bash is a session leader (spawned with setsid), and everything it
// starts stays in its session (sid) unless it calls setsid itself: children, grandchildren,
// and double-forked daemons like `(sleep 100 &)` that were reparented away from bash. The
// processes of one run are those in bash's session, other than bash, that started at or
// after the run started (by /proc start time, in clock ticks since boot). That spares
// background jobs from earlier runs. Start times have a resolution of one tick (10 ms), so
// the window opens one tick early: a job an earlier run started in the last tick before this
// run counts as this run's.
import { readdirSync, readFileSync } from 'node:fs'
import type { Clock } from './clock.ts'

/** Clock ticks per second of /proc start times (USER_HZ, 100 on every Linux ABI in use). */
export const CLOCK_TICKS_PER_SECOND = 100

/** What the agent needs from one /proc/<pid>/stat line. */
export interface ProcInfo {
  /** Process id. */
  pid: number
  /** Parent process id. */
  ppid: number
  /** Process group id. */
  pgid: number
  /** Session id. */
  sid: number
  /** Start time, in clock ticks since boot. */
  startTicks: number
  /** One-letter state (`R`, `S`, `Z`, ...). */
  state: string
}

/** Parses one /proc/<pid>/stat line; null when it is malformed. */
export function parseProcStat(line: string): ProcInfo | null {
  // The command name sits in parentheses and may itself contain spaces and parentheses.
  const close = line.lastIndexOf(')')
  if (close < 0) return null
  const pid = Number.parseInt(line, 10)
  const rest = line.slice(close + 2).split(' ')
  // rest[0] is field 3 (state); field n is rest[n - 3].
  const state = rest[0]
  const ppid = Number(rest[1])
  const pgid = Number(rest[2])
  const sid = Number(rest[3])
  const startTicks = Number(rest[19])
  if (state === undefined || !Number.isFinite(pid) || !Number.isFinite(startTicks)) return null
  return { pid, ppid, pgid, sid, startTicks, state }
}

/** Reads process facts from a /proc tree and sends signals. */
export class ProcessTable {
  readonly #procRoot: string
  readonly #clock: Clock
  readonly #uptimeTicksAtBase: number
  readonly #monotonicAtBase: number

  /** Reads from `procRoot` (normally `/proc`); `clock` converts monotonic time to ticks since boot. */
  constructor(clock: Clock, procRoot = '/proc') {
    this.#procRoot = procRoot
    this.#clock = clock
    const uptime = Number.parseFloat(readFileSync(`${procRoot}/uptime`, 'latin1'))
    this.#uptimeTicksAtBase = Math.floor(uptime * CLOCK_TICKS_PER_SECOND)
    this.#monotonicAtBase = clock.monotonicMs()
  }

  /** The current time in clock ticks since boot, as /proc start times count it. */
  nowTicks(): number {
    const elapsedMs = this.#clock.monotonicMs() - this.#monotonicAtBase
    return this.#uptimeTicksAtBase + Math.floor((elapsedMs * CLOCK_TICKS_PER_SECOND) / 1000)
  }

  /** One process, or null when it is gone. */
  read(pid: number): ProcInfo | null {
    try {
      return parseProcStat(readFileSync(`${this.#procRoot}/${pid}/stat`, 'latin1'))
    } catch {
      return null
    }
  }

  /** Every live process that /proc shows. */
  list(): ProcInfo[] {
    const out: ProcInfo[] = []
    let names: string[]
    try {
      names = readdirSync(this.#procRoot)
    } catch {
      return out
    }
    for (const name of names) {
      const c = name.charCodeAt(0)
      if (c < 48 || c > 57) continue
      const info = this.read(Number(name))
      if (info !== null && info.state !== 'Z') out.push(info)
    }
    return out
  }

  /** Live processes in session `sid` other than `leader`, started in [sinceTicks, untilTicks). */
  sessionMembers(
    sid: number,
    leader: number,
    sinceTicks = 0,
    untilTicks = Number.POSITIVE_INFINITY,
  ): ProcInfo[] {
    return this.list().filter(
      (p) => p.sid === sid && p.pid !== leader && p.startTicks >= sinceTicks - 1 && p.startTicks < untilTicks,
    )
  }

  /**
   * Sends `signal` to each process that is still the same process (same start time).
   * Returns how many were signalled.
   */
  signal(procs: readonly ProcInfo[], signal: NodeJS.Signals): number {
    let sent = 0
    for (const p of procs) {
      const now = this.read(p.pid)
      if (now === null || now.startTicks !== p.startTicks) continue
      if (sendSignal(p.pid, signal)) sent += 1
    }
    return sent
  }
}

/** Sends a signal to one pid; false when the process is gone or not ours. */
export function sendSignal(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal)
    return true
  } catch {
    return false
  }
}
