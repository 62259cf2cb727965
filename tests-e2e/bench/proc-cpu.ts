// CPU time a process has used, from /proc (Linux): for figures such as CPU ms per MiB streamed.
import { readFileSync } from 'node:fs'

/** Clock ticks per second of /proc's times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100

/** User plus system CPU time `pid` has used so far, in milliseconds; 0 when it is gone. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) start after its closing paren.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const ticks = Number(fields[11]) + Number(fields[12])
    return (ticks * 1000) / TICKS_PER_SECOND
  } catch {
    return 0
  }
}
