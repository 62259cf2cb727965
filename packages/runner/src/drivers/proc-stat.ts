// Facts about a process from /proc/<pid>/stat (Linux): its state, parent and start time. The
// start time (clock ticks since boot) never changes for a process and differs for a recycled
// pid, so a stored (pid, startTime) pair names one process across runner restarts.
import { readdirSync, readFileSync } from 'node:fs'

/** A process as /proc/<pid>/stat describes it. */
export interface ProcStat {
  /** One-letter state: R, S, D, Z (zombie), T... */
  state: string
  /** Parent pid. */
  ppid: number
  /** Start time in clock ticks after boot, as a decimal string. */
  startTime: string
}

/** The process's stat, or null when it does not exist. */
export function procStat(pid: number): ProcStat | null {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return null
  }
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { state: fields[0] ?? '', ppid: Number(fields[1]), startTime: fields[19] ?? '' }
}

/** The pids whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim()
    if (text) return text.split(' ').map(Number)
  } catch {
    // the kernel may lack CONFIG_PROC_CHILDREN; scan below
  }
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (/^\d+$/.test(name) && procStat(Number(name))?.ppid === pid) out.push(Number(name))
  }
  return out
}

/** Every descendant pid of `root`, depth first. */
export function descendantsOf(root: number): number[] {
  const out: number[] = []
  const stack = [root]
  while (stack.length > 0) {
    for (const child of childrenOf(stack.pop()!)) {
      out.push(child)
      stack.push(child)
    }
  }
  return out
}
