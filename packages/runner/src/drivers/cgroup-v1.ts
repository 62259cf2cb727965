// cgroup v1 behind the `Cgroups` interface (cgroups.ts): a `conch/<sandboxId>` group under each
// controller the limits need (pids always, memory and cpu when asked, memory and cpuacct for
// usage whenever mounted), the limits written before any process joins, a `work` child under
// memory and pids for the commands (pids.max there is the sandbox's limit, the agent's reserve
// sits above it in the sandbox group), and kill by SIGKILLing every pid in cgroup.procs until
// the groups are empty (v1 has no cgroup.kill). The driver puts the sandbox's first process in every group before it
// forks, so everything in the sandbox inherits them.
import { existsSync, mkdirSync, realpathSync } from 'node:fs'
import { join } from 'node:path'
import { RunnerError } from '../runner-error.ts'
import { readCgroupNumber, readKeyed, readProcs, removeCgroupDirs, writeCgroupFile } from './cgroup-files.ts'
import {
  type CgroupLimits,
  type CgroupStats,
  type Cgroups,
  CPU_PERIOD_US,
  cpuQuotaUs,
  DEFAULT_PIDS,
  type SandboxCgroup,
  type SandboxCgroupSpec,
} from './cgroups.ts'
import { AGENT_PIDS_RESERVE } from './work-cgroup.ts'

/** Options of the v1 implementation. */
export interface CgroupsV1Options {
  /** Mount dir of each v1 controller (from `detectCgroups`); `memory` → `/sys/fs/cgroup/memory`. */
  controllers: Record<string, string>
  /** Folder made under each controller for conch's groups; default `conch`. */
  parent?: string
  /** How long `kill` keeps killing before it reports the survivors; default 5 s. */
  killTimeoutMs?: number
}

/** How often `kill` looks again at cgroup.procs: v1 has no event for a group that empties. */
const KILL_RETRY_MS = 10

/** The line of a memory group's oom_control (v1) or memory.events (v2) that counts OOM kills. */
const OOM_KILL_KEY = 'oom_kill'

/** The `Cgroups` interface on cgroup v1: one group per controller mount, pids killed one by one. */
export class CgroupsV1 implements Cgroups {
  /** cgroup v1. */
  readonly version = 1 as const
  readonly #controllers: Record<string, string>
  readonly #parent: string
  readonly #killTimeoutMs: number

  /** Uses the given controller mounts; nothing is written until `create`. */
  constructor(options: CgroupsV1Options) {
    this.#controllers = options.controllers
    this.#parent = options.parent ?? 'conch'
    this.#killTimeoutMs = options.killTimeoutMs ?? 5_000
  }

  /** Names the controller a limit needs that is not mounted, or io limits (v1 has no io.max). */
  problem(limits: CgroupLimits): string | null {
    const needed = ['pids']
    if (limits.memoryBytes !== undefined) needed.push('memory')
    if (limits.cpus !== undefined) needed.push('cpu')
    for (const controller of needed) {
      const mount = this.#controllers[controller]
      if (mount === undefined || !existsSync(join(mount, 'cgroup.procs'))) {
        return `the cgroup v1 "${controller}" controller is not mounted; mount it (mount -t cgroup -o ${controller} none /sys/fs/cgroup/${controller}) or use a cgroup v2 host`
      }
    }
    if (limits.io !== undefined) return 'io limits need cgroup v2 (io.max); this host runs cgroup v1'
    return null
  }

  /** Makes `<mount>/conch/<id>` under every mounted controller conch uses, and `work` under memory. */
  create(spec: SandboxCgroupSpec): SandboxCgroup {
    const problem = this.problem(spec.limits)
    if (problem)
      throw new RunnerError('AGENT_UNAVAILABLE', `cannot make cgroups for sandbox ${spec.id}: ${problem}`)
    const groups: string[] = []
    for (const dir of this.#sandboxDirs(spec.id)) {
      mkdirSync(dir, { recursive: true })
      groups.push(dir)
    }
    // `work` sits in two hierarchies: memory (its limit, its OOM count) and pids (its limit
    // below the sandbox's, which keeps the agent's reserve). The agent writes both procs files.
    const memoryDir = this.#dirOf('memory', spec.id)
    const pidsDir = this.#dirOf('pids', spec.id)
    let work: SandboxCgroup['work'] = null
    const workDirs: string[] = []
    if (memoryDir !== null && pidsDir !== null) {
      const dir = join(memoryDir, 'work')
      const pidsWork = join(pidsDir, 'work')
      mkdirSync(dir, { recursive: true })
      mkdirSync(pidsWork, { recursive: true })
      workDirs.push(dir, pidsWork)
      work = {
        dir,
        procs: join(dir, 'cgroup.procs'),
        oomEvents: join(dir, 'memory.oom_control'),
        pidsProcs: join(pidsWork, 'cgroup.procs'),
      }
    }
    const group: SandboxCgroup = {
      version: 1,
      id: spec.id,
      dirs: [...workDirs, ...groups],
      join: groups.map((d) => join(d, 'cgroup.procs')),
      work,
      agentReserveBytes: spec.agentReserveBytes,
    }
    this.limits(group, spec.limits)
    return group
  }

  /** Writes pids.max, the memory limits (memsw too where swap is accounted) and the CFS quota. */
  limits(group: SandboxCgroup, limits: CgroupLimits): void {
    const pids = limits.pids ?? DEFAULT_PIDS
    const pidsDir = this.#dirOf('pids', group.id)
    if (pidsDir !== null) {
      // The kernel checks every level at fork: work holds the commands to their limit, and the
      // sandbox group leaves the agent its reserve. A handle made without a pids work group (an
      // older sandbox) has no reserve: its pids.max is the commands' own.
      const hasWork = group.work?.pidsProcs !== undefined
      writeCgroupFile(pidsDir, 'pids.max', String(pids + (hasWork ? AGENT_PIDS_RESERVE : 0)))
      if (hasWork) writeCgroupFile(join(pidsDir, 'work'), 'pids.max', String(pids))
    }
    const memoryDir = this.#dirOf('memory', group.id)
    if (limits.memoryBytes !== undefined && memoryDir !== null) {
      setMemoryV1(memoryDir, limits.memoryBytes + group.agentReserveBytes)
      if (group.work !== null) setMemoryV1(group.work.dir, limits.memoryBytes)
    }
    const cpuDir = this.#dirOf('cpu', group.id)
    if (limits.cpus !== undefined && cpuDir !== null) {
      writeCgroupFile(cpuDir, 'cpu.cfs_period_us', String(CPU_PERIOD_US))
      writeCgroupFile(cpuDir, 'cpu.cfs_quota_us', String(cpuQuotaUs(limits.cpus)))
    }
  }

  /** Every pid in any of the sandbox's groups, without duplicates. */
  pids(group: SandboxCgroup): number[] {
    const pids = new Set<number>()
    for (const dir of group.dirs) for (const pid of readProcs(dir)) pids.add(pid)
    return [...pids]
  }

  /** SIGKILLs every pid in the groups until none is left; INTERNAL when some outlive the timeout. */
  async kill(group: SandboxCgroup): Promise<void> {
    const deadline = Date.now() + this.#killTimeoutMs
    for (;;) {
      const pids = this.pids(group)
      if (pids.length === 0) return
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // gone between the read and the kill
        }
      }
      if (Date.now() >= deadline) {
        throw new RunnerError(
          'INTERNAL',
          `sandbox ${group.id} still has processes after SIGKILL: ${pids.join(', ')}; check for processes in uninterruptible sleep (state D) on a hung mount`,
        )
      }
      await new Promise((resolve) => setTimeout(resolve, KILL_RETRY_MS))
    }
  }

  /** Kills what is left, then removes the work group and every sandbox group. */
  async remove(group: SandboxCgroup): Promise<void> {
    await this.kill(group)
    await removeCgroupDirs(group.dirs, this.#killTimeoutMs)
  }

  /** Memory (usage, max usage), cpuacct time, pids.current and OOM kills of the group and work. */
  stats(group: SandboxCgroup): CgroupStats | null {
    const pidsDir = this.#dirOf('pids', group.id)
    if (pidsDir === null || !existsSync(pidsDir)) return null
    const memoryDir = this.#dirOf('memory', group.id)
    const cpuacctDir = this.#dirOf('cpuacct', group.id)
    // v1 counts an OOM kill only in the group where it happened, so the work group adds its own.
    let oomKills = 0
    for (const dir of [memoryDir, group.work?.dir]) {
      if (dir) oomKills += readKeyed(dir, 'memory.oom_control')[OOM_KILL_KEY] ?? 0
    }
    const cpuNs = cpuacctDir === null ? null : readCgroupNumber(cpuacctDir, 'cpuacct.usage')
    return {
      memoryBytes: memoryDir === null ? 0 : (readCgroupNumber(memoryDir, 'memory.usage_in_bytes') ?? 0),
      memoryPeakBytes: memoryDir === null ? null : readCgroupNumber(memoryDir, 'memory.max_usage_in_bytes'),
      cpuSeconds: cpuNs === null ? 0 : cpuNs / 1e9,
      pids: readCgroupNumber(pidsDir, 'pids.current') ?? this.pids(group).length,
      oomKills,
    }
  }

  /** The sandbox's group under each distinct mounted controller (co-mounted cpu,cpuacct counts once). */
  #sandboxDirs(id: string): string[] {
    const seen = new Set<string>()
    const out: string[] = []
    for (const controller of ['pids', 'memory', 'cpu', 'cpuacct']) {
      const dir = this.#dirOf(controller, id)
      if (dir === null) continue
      const mount = this.#controllers[controller] ?? ''
      const real = realpathOrSelf(mount)
      if (seen.has(real)) continue
      seen.add(real)
      out.push(dir)
    }
    return out
  }

  /** `<mount>/conch/<id>` for a mounted controller, or null. */
  #dirOf(controller: string, id: string): string | null {
    const mount = this.#controllers[controller]
    return mount === undefined ? null : join(mount, this.#parent, id)
  }
}

/** Sets memory.limit_in_bytes and, where swap is accounted, memsw to the same (no swap on top). */
function setMemoryV1(dir: string, bytes: number): void {
  const swapFile = join(dir, 'memory.memsw.limit_in_bytes')
  if (!existsSync(swapFile)) {
    writeCgroupFile(dir, 'memory.limit_in_bytes', String(bytes))
    return
  }
  // The kernel keeps memory <= memsw at every step: raise memsw first, lower memory first.
  const currentSwap = readCgroupNumber(dir, 'memory.memsw.limit_in_bytes') ?? Number.POSITIVE_INFINITY
  if (bytes > currentSwap) {
    writeCgroupFile(dir, 'memory.memsw.limit_in_bytes', String(bytes))
    writeCgroupFile(dir, 'memory.limit_in_bytes', String(bytes))
  } else {
    writeCgroupFile(dir, 'memory.limit_in_bytes', String(bytes))
    writeCgroupFile(dir, 'memory.memsw.limit_in_bytes', String(bytes))
  }
}

/** The real path of a mount (a co-mounted `cpu` is a symlink to `cpu,cpuacct`), or the path itself. */
function realpathOrSelf(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}
