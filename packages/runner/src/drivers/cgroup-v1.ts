// cgroup v1 limits for one sandbox: a `conch/<sandboxId>` group under each controller the
// limits need (pids always, memory and cpu when asked), the limits written before any process
// joins, and helpers to list and remove the group's processes. The driver puts the sandbox's
// first process in every group before it forks, so everything in the sandbox inherits them.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { SandboxLimits } from '@conch/protocol'

/** Where cgroup v1 controllers are mounted on Linux. */
export const CGROUP_V1_ROOT = '/sys/fs/cgroup'

/** Process limit applied when a sandbox asks for none: a fork bomb must not take the host down. */
export const DEFAULT_PIDS_LIMIT = 1024

/** The CFS period used for CPU quotas, in microseconds. */
const CFS_PERIOD_US = 100_000

/** The controllers a sandbox with these limits needs. */
export function controllersFor(limits: SandboxLimits): string[] {
  const out = ['pids']
  if (limits.memoryBytes !== undefined) out.push('memory')
  if (limits.cpus !== undefined) out.push('cpu')
  return out
}

/** Why cgroup v1 cannot be used for these controllers, or null when it can. */
export function cgroupProblem(root: string, controllers: readonly string[]): string | null {
  for (const controller of controllers) {
    if (!existsSync(join(root, controller, 'cgroup.procs'))) {
      return `the cgroup v1 "${controller}" controller is not mounted at ${join(root, controller)}`
    }
  }
  return null
}

/** Creates `<root>/<controller>/conch/<id>` for each controller and writes the limits; returns the dirs. */
export function createCgroups(root: string, id: string, limits: SandboxLimits): string[] {
  const dirs: string[] = []
  for (const controller of controllersFor(limits)) {
    const dir = join(root, controller, 'conch', id)
    mkdirSync(dir, { recursive: true })
    dirs.push(dir)
    if (controller === 'pids') writeFileSync(join(dir, 'pids.max'), String(limits.pids ?? DEFAULT_PIDS_LIMIT))
    if (controller === 'memory' && limits.memoryBytes !== undefined) {
      writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limits.memoryBytes))
    }
    if (controller === 'cpu' && limits.cpus !== undefined) {
      writeFileSync(join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US))
      writeFileSync(
        join(dir, 'cpu.cfs_quota_us'),
        String(Math.max(1_000, Math.round(limits.cpus * CFS_PERIOD_US))),
      )
    }
  }
  return dirs
}

/** Every pid in the groups (no duplicates); empty when the groups are gone. */
export function cgroupPids(dirs: readonly string[]): number[] {
  const pids = new Set<number>()
  for (const dir of dirs) {
    let text: string
    try {
      text = readFileSync(join(dir, 'cgroup.procs'), 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n')) if (line) pids.add(Number(line))
  }
  return [...pids]
}

/** Removes the groups; a group that still holds processes is left (rmdir fails with EBUSY). */
export function removeCgroups(dirs: readonly string[]): void {
  for (const dir of dirs) {
    try {
      rmdirSync(dir)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }
  }
}
