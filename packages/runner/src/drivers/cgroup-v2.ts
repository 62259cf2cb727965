// The `Cgroups` interface on cgroup v2. conch works inside one delegated dir (`delegated`): the
// runner's own group under systemd (its unit needs Delegate=yes), or a `conch` subtree it
// creates below the mount. Layout, with `<id>` a sandbox:
//
//   <delegated>/cgroup.subtree_control   +cpu +io +memory +pids (each enabled from the subtree root down)
//   <delegated>/runner/                  the runner itself, when it started inside <delegated>
//   <delegated>/<id>/                    memory.max (commands + agent reserve), memory.swap.max 0,
//                                        pids.max (commands + agent reserve), io.max;
//                                        subtree_control +memory +pids (+cpu)
//   <delegated>/<id>/agent/              the launcher and agent (the agent's memory.oom.group stays 0)
//   <delegated>/<id>/work/               the commands: memory.max = their limit, memory.swap.max 0,
//                                        pids.max = their limit, cpu.max
//
// cpu.max sits on `work`, not on the sandbox group: the commands get `cpus` cores, and a
// CPU-bound command cannot starve the agent that serves it (its heartbeats, its hello while it
// starts). The agent's CPU time still counts in the sandbox's usage.
//
// v2 lets no process live in a group that hands controllers to its children, so the runner, if
// it sits in <delegated>, first moves into <delegated>/runner, and the agent lives in a leaf. In a
// container with its own cgroup namespace the mount shows the container's group, which is no
// real root: its processes (the runner among them) move into <mount>/runner first.
// memory.oom.group stays 0 everywhere: on `work` it would kill every session's shell for one hog,
// and on the sandbox or agent group it would kill the agent. A kill is one write to cgroup.kill;
// `cgroup.events` says when the group has emptied; `memory.events` counts OOM kills.
//
// Every path is injected, so tests run against a fake tree in a temp dir and the VM tier runs
// the same code against a real v2 kernel.
import { existsSync, mkdirSync, watch } from 'node:fs'
import { join, relative, sep } from 'node:path'
import { RunnerError } from '../runner-error.ts'
import {
  readCgroupFile,
  readCgroupNumber,
  readKeyed,
  readProcs,
  removeCgroupDirs,
  writeCgroupFile,
} from './cgroup-files.ts'
import {
  type CgroupLimits,
  type CgroupStats,
  type Cgroups,
  CPU_PERIOD_US,
  cpuQuotaUs,
  DEFAULT_PIDS,
  type IoLimit,
  type SandboxCgroup,
  type SandboxCgroupSpec,
  V2_CONTROLLERS,
} from './cgroups.ts'
import { AGENT_PIDS_RESERVE } from './work-cgroup.ts'

/** Options of the v2 implementation (the `version: 2` result of `detectCgroups`). */
export interface CgroupsV2Options {
  /** Where cgroup2 is mounted. */
  mount: string
  /** The dir conch manages. */
  delegated: string
  /** True when `delegated` is made by conch and controllers are enabled from the mount down. */
  createsSubtree: boolean
  /** True when memory.events counts only a group's own events (mount option memory_localevents). */
  localEvents?: boolean
  /** How long `kill` waits for cgroup.events to say the group emptied; default 5 s. */
  killTimeoutMs?: number
  /** Told of every write to a cgroup file, in order (debug logging; tests check the order). */
  trace?: (path: string, value: string) => void
}

/** The leaf the runner moves into when it starts inside the delegated dir. */
export const RUNNER_LEAF = 'runner'

/** The controllers a sandbox's limits need (pids always, for the default fork-bomb limit). */
function neededControllers(limits: CgroupLimits): string[] {
  const out = ['pids']
  if (limits.memoryBytes !== undefined) out.push('memory')
  if (limits.cpus !== undefined) out.push('cpu')
  if (limits.io !== undefined) out.push('io')
  return out
}

/** The words of a space-separated list file (`cgroup.controllers`); empty when missing. */
function words(dir: string, name: string): string[] {
  return (readCgroupFile(dir, name) ?? '').trim().split(/\s+/).filter(Boolean)
}

/** An io.max line: the device, then each rate (`max` when unlimited). */
export function ioMaxLine(io: IoLimit): string {
  const rate = (n: number | undefined): string => (n === undefined ? 'max' : String(n))
  return `${io.device} rbps=${rate(io.readBps)} wbps=${rate(io.writeBps)} riops=${rate(io.readIops)} wiops=${rate(io.writeIops)}`
}

/** The `Cgroups` interface on unified cgroup v2. */
export class CgroupsV2 implements Cgroups {
  /** cgroup v2. */
  readonly version = 2 as const
  readonly #mount: string
  readonly #delegated: string
  readonly #createsSubtree: boolean
  readonly #localEvents: boolean
  readonly #killTimeoutMs: number
  readonly #trace: ((path: string, value: string) => void) | undefined
  #prepared = false

  /** Uses the given mount and delegated dir; nothing is written until `create` (or `prepare`). */
  constructor(options: CgroupsV2Options) {
    this.#mount = options.mount
    this.#delegated = options.delegated
    this.#createsSubtree = options.createsSubtree
    this.#localEvents = options.localEvents ?? false
    this.#killTimeoutMs = options.killTimeoutMs ?? 5_000
    this.#trace = options.trace
  }

  /** Names a controller the limits need that the delegated dir's parent does not offer. */
  problem(limits: CgroupLimits): string | null {
    const source = this.#createsSubtree ? this.#mount : this.#delegated
    const available = words(source, 'cgroup.controllers')
    const missing = neededControllers(limits).filter((c) => !available.includes(c))
    if (missing.length === 0) return null
    return this.#createsSubtree
      ? `cgroup v2 at ${this.#mount} does not offer the ${missing.join(', ')} controller(s); enable them in the kernel or the container's cgroup`
      : `the runner's cgroup ${this.#delegated} was not given the ${missing.join(', ')} controller(s); set Delegate=yes on its systemd unit`
  }

  /**
   * Readies the delegated dir once: makes it (own subtree), moves the runner out of it into
   * `runner` (no processes in inner groups), and enables conch's controllers in
   * cgroup.subtree_control of each group from the subtree root down to it.
   */
  prepare(): void {
    if (this.#prepared) return
    const chain = this.#createsSubtree ? this.#chainFromMount() : [this.#delegated]
    mkdirSync(this.#delegated, { recursive: true })
    for (const dir of chain) {
      // The root cgroup may hold processes and hand out controllers; every other group may not,
      // and that includes a mount that shows a container's own group (a cgroup namespace root).
      if (dir !== this.#mount || !isHierarchyRoot(dir)) this.#evacuate(dir)
      const available = words(dir, 'cgroup.controllers')
      const enabled = words(dir, 'cgroup.subtree_control')
      const wanted = V2_CONTROLLERS.filter((c) => available.includes(c) && !enabled.includes(c))
      if (wanted.length > 0) this.#write(dir, 'cgroup.subtree_control', wanted.map((c) => `+${c}`).join(' '))
    }
    this.#prepared = true
  }

  /** Makes `<delegated>/<id>` with its limits, an `agent` leaf and a `work` leaf for the commands. */
  create(spec: SandboxCgroupSpec): SandboxCgroup {
    const problem = this.problem(spec.limits)
    if (problem)
      throw new RunnerError('AGENT_UNAVAILABLE', `cannot make cgroups for sandbox ${spec.id}: ${problem}`)
    this.prepare()
    const dir = join(this.#delegated, spec.id)
    mkdirSync(dir, { recursive: true })
    const work = join(dir, 'work')
    const group: SandboxCgroup = {
      version: 2,
      id: spec.id,
      dirs: [work, join(dir, 'agent'), dir],
      join: [join(dir, 'agent', 'cgroup.procs')],
      work: { dir: work, procs: join(work, 'cgroup.procs'), oomEvents: join(work, 'memory.events') },
      agentReserveBytes: spec.agentReserveBytes,
    }
    // Limits on the sandbox group first, then the leaves: no process has joined yet.
    this.#writeSandboxLimits(group, spec.limits)
    // memory always, so work's memory.events (bound into the sandbox) exists; pids always, for
    // the agent's reserve of pids above work's limit.
    const controllers = spec.limits.cpus === undefined ? ['memory', 'pids'] : ['cpu', 'memory', 'pids']
    this.#write(dir, 'cgroup.subtree_control', controllers.map((c) => `+${c}`).join(' '))
    mkdirSync(join(dir, 'agent'), { recursive: true })
    mkdirSync(work, { recursive: true })
    this.#writeWorkLimits(group, spec.limits)
    return group
  }

  /** Writes new limits into the sandbox group and its work leaf. */
  limits(group: SandboxCgroup, limits: CgroupLimits): void {
    this.#writeSandboxLimits(group, limits)
    this.#writeWorkLimits(group, limits)
  }

  /** Every pid in the sandbox group and its leaves. */
  pids(group: SandboxCgroup): number[] {
    const pids = new Set<number>()
    for (const dir of group.dirs) for (const pid of readProcs(dir)) pids.add(pid)
    return [...pids]
  }

  /** Writes 1 to cgroup.kill (or SIGKILLs each pid on kernels before 5.14) and waits for cgroup.events. */
  async kill(group: SandboxCgroup): Promise<void> {
    const dir = this.#sandboxDir(group)
    if (!existsSync(dir)) return
    const emptied = this.#waitEmpty(group)
    if (existsSync(join(dir, 'cgroup.kill'))) {
      this.#write(dir, 'cgroup.kill', '1')
    } else {
      for (const pid of this.pids(group)) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // gone between the read and the kill
        }
      }
    }
    await emptied
  }

  /** Kills what is left and removes the leaves, then the sandbox group. */
  async remove(group: SandboxCgroup): Promise<void> {
    await this.kill(group)
    await removeCgroupDirs(group.dirs, this.#killTimeoutMs)
  }

  /** memory.current/peak, cpu.stat usage_usec, pids.current and memory.events oom_kill of the sandbox. */
  stats(group: SandboxCgroup): CgroupStats | null {
    const dir = this.#sandboxDir(group)
    if (!existsSync(dir)) return null
    // memory.events is hierarchical unless the mount has memory_localevents.
    let oomKills = readKeyed(dir, 'memory.events').oom_kill ?? 0
    if (this.#localEvents) {
      for (const leaf of group.dirs)
        if (leaf !== dir) oomKills += readKeyed(leaf, 'memory.events').oom_kill ?? 0
    }
    const usageUsec = readKeyed(dir, 'cpu.stat').usage_usec ?? 0
    return {
      memoryBytes: readCgroupNumber(dir, 'memory.current') ?? 0,
      memoryPeakBytes: readCgroupNumber(dir, 'memory.peak'),
      cpuSeconds: usageUsec / 1e6,
      pids: readCgroupNumber(dir, 'pids.current') ?? this.pids(group).length,
      oomKills,
    }
  }

  /** memory.max and pids.max (commands + agent reserves), memory.swap.max and io.max. */
  #writeSandboxLimits(group: SandboxCgroup, limits: CgroupLimits): void {
    const dir = this.#sandboxDir(group)
    // A handle made without a work leaf has no reserve: its pids.max is the commands' own.
    const reserve = group.work === null ? 0 : AGENT_PIDS_RESERVE
    this.#write(dir, 'pids.max', String((limits.pids ?? DEFAULT_PIDS) + reserve))
    if (limits.memoryBytes !== undefined) {
      this.#write(dir, 'memory.max', String(limits.memoryBytes + group.agentReserveBytes))
      // The file exists only where swap is accounted; no swap means a hog meets its limit in RAM.
      if (existsSync(join(dir, 'memory.swap.max'))) this.#write(dir, 'memory.swap.max', '0')
    }
    if (limits.io !== undefined) this.#write(dir, 'io.max', ioMaxLine(limits.io))
  }

  /** The commands' memory.max, memory.swap.max, pids.max and cpu.max. */
  #writeWorkLimits(group: SandboxCgroup, limits: CgroupLimits): void {
    if (group.work === null) return
    const dir = group.work.dir
    this.#write(dir, 'pids.max', String(limits.pids ?? DEFAULT_PIDS))
    if (limits.memoryBytes !== undefined) {
      this.#write(dir, 'memory.max', String(limits.memoryBytes))
      if (existsSync(join(dir, 'memory.swap.max'))) this.#write(dir, 'memory.swap.max', '0')
    }
    if (limits.cpus !== undefined) this.#write(dir, 'cpu.max', `${cpuQuotaUs(limits.cpus)} ${CPU_PERIOD_US}`)
  }

  /** Resolves once cgroup.events says `populated 0`; INTERNAL with the survivors after the timeout. */
  #waitEmpty(group: SandboxCgroup): Promise<void> {
    const dir = this.#sandboxDir(group)
    const populated = (): boolean => {
      const events = readCgroupFile(dir, 'cgroup.events')
      // Without cgroup.events (gone, or a pre-4.12 kernel) the procs files are the truth.
      return events === null ? this.pids(group).length > 0 : parseEventsPopulated(events)
    }
    return new Promise<void>((resolve, reject) => {
      // Watch before the first read so an emptying between the two is not missed.
      const watcher = existsSync(join(dir, 'cgroup.events'))
        ? watch(join(dir, 'cgroup.events'), () => check())
        : null
      const timer = setTimeout(() => {
        finish()
        reject(
          new RunnerError(
            'INTERNAL',
            `sandbox ${group.id} still has processes after cgroup.kill: ${this.pids(group).join(', ') || 'none listed'}; check for processes in uninterruptible sleep (state D)`,
          ),
        )
      }, this.#killTimeoutMs)
      const finish = (): void => {
        clearTimeout(timer)
        watcher?.close()
      }
      const check = (): void => {
        if (populated()) return
        finish()
        resolve()
      }
      watcher?.on('error', () => check())
      check()
      // No file to watch: the SIGKILL fallback is synchronous, so one more look decides.
      if (watcher === null && populated()) {
        finish()
        reject(new RunnerError('INTERNAL', `sandbox ${group.id} still has processes after SIGKILL`))
      }
    })
  }

  /** Moves every process of `dir` into `<dir>/runner`, so `dir` may hand controllers down. */
  #evacuate(dir: string): void {
    const pids = readProcs(dir)
    if (pids.length === 0) return
    const leaf = join(dir, RUNNER_LEAF)
    mkdirSync(leaf, { recursive: true })
    // The kernel takes one pid per write.
    for (const pid of pids) {
      try {
        this.#write(leaf, 'cgroup.procs', String(pid))
      } catch (error) {
        // A process that exited between the read and the write is not in the way.
        if (readProcs(dir).includes(pid)) throw error
      }
    }
  }

  /** The mount and each dir below it down to `delegated`. */
  #chainFromMount(): string[] {
    const rel = relative(this.#mount, this.#delegated)
    if (rel.startsWith('..')) {
      throw new RunnerError(
        'INTERNAL',
        `the cgroup dir ${this.#delegated} is not below the cgroup2 mount ${this.#mount}`,
      )
    }
    const chain = [this.#mount]
    let dir = this.#mount
    for (const part of rel.split(sep).filter(Boolean)) {
      dir = join(dir, part)
      chain.push(dir)
    }
    return chain
  }

  /** Writes one cgroup file and tells the tracer. */
  #write(dir: string, name: string, value: string): void {
    writeCgroupFile(dir, name, value)
    this.#trace?.(join(dir, name), value)
  }

  /** The sandbox group (the last of `dirs`). */
  #sandboxDir(group: SandboxCgroup): string {
    return group.dirs[group.dirs.length - 1] ?? join(this.#delegated, group.id)
  }
}

/** Whether `dir` is the real root of the hierarchy: only there has a group no cgroup.type file. */
function isHierarchyRoot(dir: string): boolean {
  return !existsSync(join(dir, 'cgroup.type'))
}

/** Whether a cgroup.events text says the group (or a descendant) still has processes. */
export function parseEventsPopulated(text: string): boolean {
  return (/^populated (\d+)$/m.exec(text)?.[1] ?? '0') !== '0'
}
