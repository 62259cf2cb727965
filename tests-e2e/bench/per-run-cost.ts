// What one run costs each process on its path, from /proc (Linux): CPU time (schedstat, per
// thread, see proc-cpu.ts) and wakeups (voluntary context switches: the times a thread slept
// and was woken, for a process on an event loop one per message it waited for). Measured over
// a batch of sequential runs, the product's client, runner, agent and bash beside the bare
// two-hop's client, relay, holder and bash show which hop pays for a ratio, and whether it pays
// in wakeups (the design) or in CPU per wakeup (the code).
import { readdirSync, readFileSync } from 'node:fs'
import { cpuMs } from './proc-cpu.ts'

/** One process's share of a run. */
export interface RunShare {
  /** CPU time per run, µs. */
  cpuUs: number
  /** Times per run its threads slept and were woken. */
  wakeups: number
}

/** Voluntary context switches of `pid`'s live threads; 0 when it is gone. */
export function wakeupCount(pid: number): number {
  let total = 0
  let tids: string[]
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return 0
  }
  for (const tid of tids) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8')
      total += Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)?.[1] ?? 0)
    } catch {
      // A thread that exited between the listing and the read has nothing left to count.
    }
  }
  return total
}

/** The children of `pid` (its threads' children), from /proc; empty when it is gone. */
export function childPids(pid: number): number[] {
  const children: number[] = []
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const list = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim()
      if (list !== '') children.push(...list.split(' ').map(Number))
    }
  } catch {
    // Gone, or a kernel without the children file: no children known.
  }
  return children
}

/** Sums `read` over `pids`. */
function sum(pids: readonly number[], read: (pid: number) => number): number {
  return pids.reduce((total, pid) => total + read(pid), 0)
}

/**
 * Runs `runs` sequential calls of `run` and returns each named group of processes' share per
 * run (a group: a session's bash with the spare the agent keeps beside it).
 */
export async function perRunShares<Name extends string>(
  pids: Record<Name, readonly number[]>,
  runs: number,
  run: () => Promise<unknown>,
): Promise<Record<Name, RunShare>> {
  const names = Object.keys(pids) as Name[]
  const before = names.map((name) => ({ cpu: sum(pids[name], cpuMs), wakeups: sum(pids[name], wakeupCount) }))
  for (let i = 0; i < runs; i++) await run()
  const shares = {} as Record<Name, RunShare>
  names.forEach((name, i) => {
    shares[name] = {
      cpuUs: ((sum(pids[name], cpuMs) - before[i]!.cpu) * 1000) / runs,
      wakeups: (sum(pids[name], wakeupCount) - before[i]!.wakeups) / runs,
    }
  })
  return shares
}
