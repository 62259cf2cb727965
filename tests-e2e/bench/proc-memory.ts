// Memory figures from /proc: resident set (VmRSS), its peak (VmHWM, which writing `5` to
// /proc/<pid>/clear_refs resets), and proportional set size (Pss, which splits shared pages
// between the processes that map them, the fair figure for many bashes sharing one binary).

import { readFileSync, writeFileSync } from 'node:fs'
import { listTargetProcesses, type ProcEntry, type SweepTarget } from '../harness/process-sweep.ts'

function statusField(pid: number, field: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)
  if (!match) throw new Error(`no ${field} for pid ${pid}`)
  return Number(match[1]) * 1024
}

/** Resident set size in bytes. */
export function rssBytes(pid: number): number {
  return statusField(pid, 'VmRSS')
}

/**
 * Anonymous resident memory in bytes (RssAnon): what the process itself allocated, without the
 * file pages of its binary that every process running the same Node shares.
 */
export function rssAnonBytes(pid: number): number {
  return statusField(pid, 'RssAnon')
}

/** Peak resident set size in bytes since start or the last `resetPeak`. */
export function peakRssBytes(pid: number): number {
  return statusField(pid, 'VmHWM')
}

/** Resets the peak RSS to the current RSS; returns false when the kernel refuses. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5')
    return true
  } catch {
    return false
  }
}

/** Proportional set size in bytes (falls back to RSS when smaps_rollup is unreadable). */
export function pssBytes(pid: number): number {
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
    const match = /^Pss:\s+(\d+) kB/m.exec(rollup)
    if (match) return Number(match[1]) * 1024
  } catch {
    // fall through
  }
  return rssBytes(pid)
}

/** Samples the RSS of some processes on an interval and keeps each one's maximum. */
export class RssSampler {
  readonly #pids: number[]
  readonly #max = new Map<number, number>()
  readonly #timer: ReturnType<typeof setInterval>

  constructor(pids: number[], intervalMs = 50) {
    this.#pids = pids
    this.#sample()
    this.#timer = setInterval(() => this.#sample(), intervalMs)
  }

  #sample(): void {
    for (const pid of this.#pids) {
      try {
        this.#max.set(pid, Math.max(this.#max.get(pid) ?? 0, rssBytes(pid)))
      } catch {
        // The process is gone.
      }
    }
  }

  /** Stops sampling and returns the maximum RSS seen per pid. */
  stop(): Map<number, number> {
    clearInterval(this.#timer)
    this.#sample()
    return this.#max
  }
}

/** The processes of one sandbox: its agent and the bashes below it. */
export interface SandboxProcesses {
  agent: number
  bashes: number[]
}

function descendants(table: ProcEntry[], root: number): ProcEntry[] {
  const out: ProcEntry[] = []
  const stack = [root]
  while (stack.length > 0) {
    const pid = stack.pop()!
    for (const entry of table) {
      if (entry.ppid === pid) {
        out.push(entry)
        stack.push(entry.pid)
      }
    }
  }
  return out
}

/** Whether a process's cgroup paths name the sandbox (the namespace driver's groups do). */
function cgroupNames(pid: number, sandboxId: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(`/${sandboxId}`)
  } catch {
    return false
  }
}

/** Finds the agent of a sandbox (by its id on the command line or in its cgroups) and its bash processes. */
export function sandboxProcesses(
  target: SweepTarget,
  runnerPid: number,
  sandboxId: string,
): SandboxProcesses {
  const table = listTargetProcesses(target)
  // The sandbox's outermost process names its id: the agent itself under the local driver,
  // bwrap under the namespace driver, where the agent is a descendant. bwrap's own command
  // line names the agent bundle (conch-agent*.mjs) too, so the agent is the one whose program is node.
  // bwrap may take its arguments from an fd; its cgroups name the sandbox then.
  const named = table.filter(
    (e) => e.pid !== runnerPid && (e.cmdline.includes(sandboxId) || cgroupNames(e.pid, sandboxId)),
  )
  const roots = named.filter((a) => !named.some((b) => b.pid === a.ppid))
  const agent = roots
    .flatMap((root) => [root, ...descendants(table, root.pid)])
    .find((e) => /^\S*\/node\s.*conch-agent\S*\.mjs/.test(e.cmdline))
  if (!agent) {
    const seen = table.map((e) => `${e.pid} ${e.cmdline}`).join('\n')
    throw new Error(`no agent process for ${sandboxId} among:\n${seen}`)
  }
  const bashes = descendants(table, agent.pid)
    .filter((e) => /(^|\/)bash( |$)/.test(e.cmdline))
    .map((e) => e.pid)
  return { agent: agent.pid, bashes }
}
