// Finds and kills every process that a test runner left behind. A runner starts its agents
// detached, and an agent outlives its runner by design, so killing the runner's child process
// is not enough. The sweep matches processes by the run's state directory (it appears on the
// runner's and the agents' command lines) or by a marker variable in their environment, then
// adds every descendant of those, so sessions, background processes and their children go too.

import { existsSync, readdirSync, readFileSync, rmdirSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'

/** What identifies the processes of one test runner. */
export interface SweepTarget {
  /** The runner's state directory; any process whose command line contains it matches. */
  stateDir: string
  /** `NAME=value` that the runner and the sandboxes carry in their environment. */
  marker: string
}

/** One live process as /proc shows it. */
export interface ProcEntry {
  pid: number
  ppid: number
  /** The command line, arguments joined by spaces. */
  cmdline: string
  /** Whether it matched the target itself (not only as a descendant). */
  matches: boolean
}

function readOptional(path: string): string {
  try {
    return readFileSync(path, 'latin1')
  } catch {
    return ''
  }
}

function readProcTable(target: SweepTarget): ProcEntry[] {
  const entries: ProcEntry[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const pid = Number(name)
    const stat = readOptional(`/proc/${pid}/stat`)
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const state = fields[0]
    const ppid = Number(fields[1])
    if (!state || Number.isNaN(ppid) || state === 'Z' || state === 'X') continue
    const cmdline = readOptional(`/proc/${pid}/cmdline`)
    const environ = readOptional(`/proc/${pid}/environ`)
    const matches = cmdline.includes(target.stateDir) || environ.split('\0').includes(target.marker)
    entries.push({ pid, ppid, cmdline: cmdline.replaceAll('\0', ' ').trim(), matches })
  }
  return entries
}

/** Live (non-zombie) processes of the target and all their descendants, excluding this process. */
export function findTargetProcesses(target: SweepTarget): number[] {
  return listTargetProcesses(target).map((e) => e.pid)
}

/** Like `findTargetProcesses`, with each process's parent and command line. */
export function listTargetProcesses(target: SweepTarget): ProcEntry[] {
  const table = readProcTable(target)
  const byPid = new Map(table.map((e) => [e.pid, e]))
  const children = new Map<number, number[]>()
  for (const entry of table) {
    const list = children.get(entry.ppid) ?? []
    list.push(entry.pid)
    children.set(entry.ppid, list)
  }
  const found = new Set<number>()
  const stack = table.filter((e) => e.matches).map((e) => e.pid)
  while (stack.length > 0) {
    const pid = stack.pop()!
    if (found.has(pid) || pid === process.pid) continue
    found.add(pid)
    stack.push(...(children.get(pid) ?? []))
  }
  return [...found].map((pid) => byPid.get(pid)!)
}

const CGROUP_ROOT = '/sys/fs/cgroup'

/**
 * Removes the cgroups that the namespace driver made for the target's sandboxes
 * (`<controller>/conch/<sandbox id>`), once their processes are gone. A runner killed before it
 * destroyed its sandboxes leaves them behind.
 */
function removeSandboxCgroups(target: SweepTarget): void {
  const sandboxes = join(target.stateDir, 'sandboxes')
  if (!existsSync(sandboxes) || !existsSync(CGROUP_ROOT)) return
  for (const id of readdirSync(sandboxes)) {
    for (const controller of readdirSync(CGROUP_ROOT)) {
      const dir = join(CGROUP_ROOT, controller, 'conch', id)
      try {
        if (existsSync(dir)) rmdirSync(dir)
      } catch {
        // Still has a process, or not ours to remove; the next sweep tries again.
      }
    }
  }
}

/** SIGKILLs the target's processes until none is left, then removes their cgroups; returns how many it killed. */
export async function sweepProcesses(target: SweepTarget): Promise<number> {
  let killed = 0
  for (let round = 0; round < 50; round++) {
    const pids = findTargetProcesses(target)
    if (pids.length === 0) {
      removeSandboxCgroups(target)
      return killed
    }
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL')
        killed++
      } catch {
        // Already gone.
      }
    }
    // A killed process leaves /proc only once it is reaped; there is no event for that
    // for processes that are not our children, so look again shortly.
    await delay(20)
  }
  throw new Error(
    `processes of ${target.stateDir} survive SIGKILL: ${findTargetProcesses(target).join(', ')}`,
  )
}
