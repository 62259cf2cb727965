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

/** The processes of one sandbox: its agent, the bashes below it, and all of them. */
export interface SandboxProcesses {
  agent: number
  bashes: number[]
  /** Every process of the sandbox: bwrap (namespace driver), the agent and all below it. */
  all: number[]
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

/** Whether a process is in a cgroup of the sandbox `id` (`.../conch/<id>` or below it). */
function inSandboxCgroup(pid: number, id: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(`/conch/${id}`)
  } catch {
    return false
  }
}

/**
 * Finds the processes of a sandbox: those naming its id on their command line (the agent under
 * the local driver) or in its cgroups (namespace driver, whose bwrap takes its arguments over an
 * fd, so no command line names the sandbox), the processes above them up to the runner (bwrap),
 * and everything below them. The agent is the one whose program is node running the bundle.
 */
export function sandboxProcesses(
  target: SweepTarget,
  runnerPid: number,
  sandboxId: string,
): SandboxProcesses {
  const table = listTargetProcesses(target)
  const byPid = new Map(table.map((e) => [e.pid, e]))
  const members = new Set<number>()
  for (const e of table) {
    if (e.pid === runnerPid) continue
    if (!e.cmdline.includes(sandboxId) && !inSandboxCgroup(e.pid, sandboxId)) continue
    for (let p = byPid.get(e.pid); p && p.pid !== runnerPid; p = byPid.get(p.ppid)) members.add(p.pid)
  }
  for (const pid of [...members]) for (const d of descendants(table, pid)) members.add(d.pid)
  const agent = table.find((e) => members.has(e.pid) && /^\S*\/node\s.*conch-agent\S*\.mjs/.test(e.cmdline))
  if (!agent) {
    const seen = table.map((e) => `${e.pid} ${e.cmdline}`).join('\n')
    throw new Error(`no agent process for ${sandboxId} among:\n${seen}`)
  }
  const bashes = descendants(table, agent.pid)
    .filter((e) => /(^|\/)bash( |$)/.test(e.cmdline))
    .map((e) => e.pid)
  return { agent: agent.pid, bashes, all: [...members] }
}
