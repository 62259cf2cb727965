// One interface over cgroup v1 and v2 for a sandbox's limits, usage and teardown, and the
// detection that picks the version this host has.
//
// Every sandbox gets the same shape under both versions: a sandbox group that holds the limits
// of the whole sandbox (memory = the commands' limit plus the agent's reserve), the agent in it
// (v1: the group itself; v2: an `agent` leaf, since v2 forbids processes in a group that hands
// controllers to children), and a `work` child that the agent's commands move into, with the
// commands' own memory limit. A hog is then OOM-killed inside `work` and the agent keeps
// serving. On v2 the CPU limit sits on `work` too, so a busy command cannot starve the agent;
// v1 puts it on the sandbox group.
// `work` also has the sandbox's pids limit while the sandbox group allows the agent a reserve of
// pids above it (work-cgroup.ts), so a fork bomb cannot keep the agent from starting a shell.
// The handle (`SandboxCgroup`) is plain JSON: the driver stores it in its state so a restarted
// runner can still read usage, kill and remove the group.
import { accessSync, constants, existsSync, readFileSync } from 'node:fs'
import { join, posix } from 'node:path'
import type { SandboxUsage } from '@conch/protocol'
import { z } from 'zod'

/** A sandbox's usage as its cgroups count it (the wire's `SandboxUsage`). */
export type CgroupStats = SandboxUsage

/** An io.max rule for one block device (v2); a rate left out is unlimited. */
export interface IoLimit {
  /** The device as `major:minor` (see block-device.ts). */
  device: string
  /** Read bytes per second. */
  readBps?: number
  /** Write bytes per second. */
  writeBps?: number
  /** Read operations per second. */
  readIops?: number
  /** Write operations per second. */
  writeIops?: number
}

/** The limits a cgroup enforces; left out means unlimited (pids: the default below). */
export interface CgroupLimits {
  /** Memory of the sandbox's commands (the `work` group), in bytes; no swap on top. */
  memoryBytes?: number
  /** CPU in cores (0.5 = half a core): v2 throttles the commands (`work`), v1 the whole sandbox. */
  cpus?: number
  /** Processes and threads of the commands (`work`); the sandbox group adds the agent's reserve. */
  pids?: number
  /** Bandwidth of the workspace's block device, when the driver knows it. */
  io?: IoLimit
}

/** Process limit applied when none is asked: a fork bomb must not take the host down. */
export const DEFAULT_PIDS = 1024

/** The CFS period used for CPU quotas, in microseconds. */
export const CPU_PERIOD_US = 100_000

/** The quota in microseconds per `CPU_PERIOD_US` for `cpus` cores (at least 1 ms, the kernel's minimum). */
export function cpuQuotaUs(cpus: number): number {
  return Math.max(1_000, Math.round(cpus * CPU_PERIOD_US))
}

/** What a driver asks for when it makes a sandbox's cgroups. */
export interface SandboxCgroupSpec {
  /** Sandbox id; the group is named after it. */
  id: string
  /** Limits. */
  limits: CgroupLimits
  /** Memory allowed to the agent above `limits.memoryBytes` (counted in the sandbox group only). */
  agentReserveBytes: number
}

/** A sandbox's cgroups: plain JSON, stored in the driver's state. */
export const SandboxCgroup = z.object({
  /** cgroup version. */
  version: z.union([z.literal(1), z.literal(2)]),
  /** Sandbox id. */
  id: z.string(),
  /** Every group dir of the sandbox, children before parents (the order rmdir needs). */
  dirs: z.array(z.string()),
  /** The `cgroup.procs` files the launcher writes its own pid into before it execs the sandbox. */
  join: z.array(z.string()),
  /** The commands' group (null only for handles of sandboxes made without one). */
  work: z
    .object({
      /** Its dir. */
      dir: z.string(),
      /** Its cgroup.procs: a process writes 0 here to move itself in. */
      procs: z.string(),
      /** The file whose `oom_kill N` line counts its OOM kills (v1 memory.oom_control, v2 memory.events). */
      oomEvents: z.string(),
      /** cgroup v1: the work group's cgroup.procs under the pids controller (its own hierarchy), written too. */
      pidsProcs: z.string().optional(),
    })
    .nullable(),
  /** The agent's memory reserve the group was made with, so `limits` can recompute the total. */
  agentReserveBytes: z.number().int().nonnegative(),
})
/** A sandbox's cgroups. */
export type SandboxCgroup = z.infer<typeof SandboxCgroup>

/** Limits, usage and teardown of sandbox cgroups on one cgroup version. */
export interface Cgroups {
  /** Which cgroup version this is. */
  readonly version: 1 | 2
  /** Why these limits cannot be enforced here (a missing controller), or null. */
  problem(limits: CgroupLimits): string | null
  /** Makes the sandbox's groups with their limits, before any process joins. */
  create(spec: SandboxCgroupSpec): SandboxCgroup
  /** Writes new limits into an existing sandbox's groups. */
  limits(group: SandboxCgroup, limits: CgroupLimits): void
  /** Every pid in the sandbox's groups; empty when they are gone. */
  pids(group: SandboxCgroup): number[]
  /** Kills every process in the sandbox's groups and resolves once they are empty. */
  kill(group: SandboxCgroup): Promise<void>
  /** Kills what is left and removes every group dir; nothing of the sandbox stays. */
  remove(group: SandboxCgroup): Promise<void>
  /** What the sandbox uses now; null when its groups are gone. */
  stats(group: SandboxCgroup): CgroupStats | null
}

/** What detection found: a usable cgroup version with its paths, or why there is none. */
export type CgroupHost =
  | {
      /** cgroup v1 (or hybrid: the controllers sit on v1 mounts). */
      version: 1
      /** Mount dir of each v1 controller (`memory` → `/sys/fs/cgroup/memory`). */
      controllers: Record<string, string>
    }
  | {
      /** Unified cgroup v2. */
      version: 2
      /** Where cgroup2 is mounted. */
      mount: string
      /** The runner's own group dir. */
      runnerGroup: string
      /** The dir the runner may manage: its own group under systemd, else `<mount>/conch`. */
      delegated: string
      /** True when the runner creates `delegated` and enables controllers from the mount down. */
      createsSubtree: boolean
      /** True when memory.events counts only a group's own events (mount option memory_localevents). */
      localEvents: boolean
    }
  | {
      /** No usable cgroup hierarchy. */
      version: null
      /** What is missing and how to get it. */
      problem: string
    }

/** Where detection looks; every path is injectable so tests can point it at a fake tree. */
export interface CgroupDetectOptions {
  /** mountinfo of the runner's mount namespace; default /proc/self/mountinfo. */
  mountinfo?: string
  /** The runner's cgroup membership; default /proc/self/cgroup. */
  procCgroup?: string
  /** Whether systemd manages this host; default: /run/systemd/system exists. */
  systemd?: boolean
  /** The runner's uid; default its real one. */
  uid?: number
  /** Whether the runner may write into a dir; default access(2) with W_OK. */
  writable?: (dir: string) => boolean
}

/** The controllers conch uses on v2, in the order they are enabled. */
export const V2_CONTROLLERS = ['cpu', 'io', 'memory', 'pids'] as const

/** One line of mountinfo: where a filesystem is mounted and how. */
interface Mount {
  /** The mounted subtree of the filesystem (`/` for the whole). */
  root: string
  /** Where it is mounted. */
  point: string
  /** Filesystem type. */
  type: string
  /** Superblock options (v1: the controllers). */
  options: string[]
}

/** mountinfo escapes space, tab, newline and backslash as octal (`\040`). */
function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)))
}

/** The cgroup and cgroup2 mounts in a mountinfo text. */
function cgroupMounts(text: string): Mount[] {
  const out: Mount[] = []
  for (const line of text.split('\n')) {
    const fields = line.split(' ')
    const dash = fields.indexOf('-')
    if (dash < 6) continue
    const type = fields[dash + 1] ?? ''
    if (type !== 'cgroup' && type !== 'cgroup2') continue
    out.push({
      root: unescapeMount(fields[3] ?? '/'),
      point: unescapeMount(fields[4] ?? ''),
      type,
      options: (fields[dash + 3] ?? '').split(','),
    })
  }
  return out
}

/** Reads a file that detection needs; null when it cannot. */
function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return null
  }
}

/** The host dir of a cgroup `path` seen through `mount`, or null when the mount does not show it. */
function dirOf(mount: Mount, path: string): string | null {
  const rel = posix.relative(mount.root, path)
  if (rel.startsWith('..')) return null
  return rel === '' ? mount.point : join(mount.point, rel)
}

/**
 * Finds the cgroup version this host offers conch. v2 wins when its hierarchy has the memory
 * and pids controllers; a hybrid host whose controllers sit on v1 mounts (and whose v2 mount is
 * empty) is v1. Under v2 the runner manages its own group when systemd runs it (the unit needs
 * `Delegate=yes`), or else a `conch` subtree it creates below the mount.
 */
export function detectCgroups(options: CgroupDetectOptions = {}): CgroupHost {
  const mountinfoPath = options.mountinfo ?? '/proc/self/mountinfo'
  const procCgroupPath = options.procCgroup ?? '/proc/self/cgroup'
  const mountinfo = readOrNull(mountinfoPath)
  if (mountinfo === null) {
    return {
      version: null,
      problem: `cannot read ${mountinfoPath}; the runner needs Linux with /proc mounted`,
    }
  }
  const mounts = cgroupMounts(mountinfo)
  const unified = mounts.find((m) => m.type === 'cgroup2')
  const available = unified
    ? (readOrNull(join(unified.point, 'cgroup.controllers')) ?? '').trim().split(/\s+/).filter(Boolean)
    : []
  if (unified && available.includes('memory') && available.includes('pids')) {
    const membership = readOrNull(procCgroupPath) ?? ''
    const path = /^0::(.*)$/m.exec(membership)?.[1]
    if (path === undefined) {
      return {
        version: null,
        problem: `${procCgroupPath} has no cgroup v2 line (0::/path); the runner cannot find its own cgroup`,
      }
    }
    const runnerGroup = dirOf(unified, path)
    if (runnerGroup === null) {
      return {
        version: null,
        problem: `the runner's cgroup ${path} is outside the cgroup2 mount at ${unified.point}; mount the whole hierarchy (or give the runner a cgroup namespace)`,
      }
    }
    const systemd = options.systemd ?? existsSync('/run/systemd/system')
    const ownGroup = systemd && path !== '/'
    const delegated = ownGroup ? runnerGroup : join(unified.point, 'conch')
    const uid = options.uid ?? process.getuid?.() ?? 0
    if (uid !== 0 && !(options.writable ?? writable)(ownGroup ? delegated : unified.point)) {
      return {
        version: null,
        problem: ownGroup
          ? `cgroup v2: the runner's cgroup ${delegated} is not writable by uid ${uid}; run the runner in a systemd unit with Delegate=yes (or as root)`
          : `cgroup v2 at ${unified.point} is not writable by uid ${uid}; run the runner as root, or under systemd with Delegate=yes (systemd-run -p Delegate=yes ...)`,
      }
    }
    return {
      version: 2,
      mount: unified.point,
      runnerGroup,
      delegated,
      createsSubtree: !ownGroup,
      localEvents: unified.options.includes('memory_localevents'),
    }
  }
  const controllers: Record<string, string> = {}
  for (const mount of mounts) {
    if (mount.type !== 'cgroup') continue
    for (const option of mount.options) {
      if (['cpu', 'cpuacct', 'memory', 'pids', 'blkio'].includes(option)) controllers[option] ??= mount.point
    }
  }
  if (controllers.pids !== undefined) return { version: 1, controllers }
  if (unified) {
    return {
      version: null,
      problem: `cgroup v2 is mounted at ${unified.point} but offers ${available.length ? available.join(', ') : 'no controllers'} (conch needs memory and pids), and no cgroup v1 pids controller is mounted; boot with systemd.unified_cgroup_hierarchy=1, or run the runner as root outside a container that hides the controllers`,
    }
  }
  return {
    version: null,
    problem: `no cgroup filesystem is mounted (read ${mountinfoPath}); mount cgroup2 at /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup) or the v1 controllers`,
  }
}

/** True when the runner may write into `dir`. */
function writable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK)
    return true
  } catch {
    return false
  }
}
