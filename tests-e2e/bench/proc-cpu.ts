// CPU time a process has used, from /proc (Linux): for figures such as CPU ms per MiB streamed.
//
// The scheduler's own count (`/proc/<pid>/task/<tid>/schedstat`, nanoseconds on a CPU, summed
// over the process's threads, its collector's helpers included) is read where the kernel keeps
// it; `/proc/<pid>/stat`'s user and system times move in 10 ms ticks, which over the quick
// bench's 64 MiB stream is a step of 0.16 ms per MiB, as large as the differences measured.
import { readdirSync, readFileSync } from 'node:fs'

/** Clock ticks per second of /proc's times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100

/** CPU time `pid`'s live threads have used, in ms; null when the kernel keeps no schedstat. */
function schedstatMs(pid: number): number | null {
  let ns = 0
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])
    } catch (error) {
      // A thread that exited between the listing and the read has nothing left to count.
      if (
        (error as NodeJS.ErrnoException).code === 'ENOENT' ||
        (error as NodeJS.ErrnoException).code === 'ESRCH'
      )
        continue
      return null
    }
  }
  return Number.isFinite(ns) ? ns / 1e6 : null
}

/** User plus system CPU time `pid` has used so far, in milliseconds; 0 when it is gone. */
export function cpuMs(pid: number): number {
  try {
    const precise = schedstatMs(pid)
    if (precise !== null) return precise
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) start after its closing paren.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const ticks = Number(fields[11]) + Number(fields[12])
    return (ticks * 1000) / TICKS_PER_SECOND
  } catch {
    return 0
  }
}
