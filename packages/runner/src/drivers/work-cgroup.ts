// The memory group of a sandbox's commands. A sandbox's memory cgroup holds its agent; its
// shells and processes move themselves into a `work` child group as they start (the agent's
// spawn writes to the child's cgroup.procs, bound into the sandbox and owned by the sandbox
// user). `work` gets the limit the user asked for and the parent that plus the agent's
// reserve, so a command that exhausts memory is OOM-killed inside `work` and never takes the
// agent with it. The counter of those kills (`memory.oom_control`) is bound read-only too.
import { chownSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** Memory kept for the agent above the sandbox's own limit. */
export const AGENT_MEMORY_RESERVE_BYTES = 256 * 1024 * 1024

/** Where the work group's files appear inside the sandbox. */
export const GUEST_WORK_CGROUP = {
  /** Writable by the sandbox user: a process writes 0 to move itself in. */
  procs: '/run/conch/cgroup.procs',
  /** Read-only: `oom_kill N` counts the commands the limit killed. */
  oomControl: '/run/conch/memory.oom_control',
}

/** The parent's limit for a sandbox that asked for `limitBytes`. */
export function sandboxMemoryLimit(limitBytes: number): number {
  return limitBytes + AGENT_MEMORY_RESERVE_BYTES
}

/** Creates `<memoryDir>/work` with `limitBytes` (and the same memory+swap limit where swap is accounted). */
export function createWorkCgroup(memoryDir: string, limitBytes: number, uid: number, gid: number): string {
  const parentSwap = join(memoryDir, 'memory.memsw.limit_in_bytes')
  if (existsSync(parentSwap)) writeFileSync(parentSwap, String(sandboxMemoryLimit(limitBytes)))
  const dir = join(memoryDir, 'work')
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes))
  const swap = join(dir, 'memory.memsw.limit_in_bytes')
  if (existsSync(swap)) writeFileSync(swap, String(limitBytes))
  chownSync(join(dir, 'cgroup.procs'), uid, gid)
  return dir
}
