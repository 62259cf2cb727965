// What a runner that is not root can use to isolate and limit a namespace sandbox, and what it
// cannot. Model:
// - Isolation: bubblewrap with an unprivileged user namespace (no setuid helper). The kernel lets
//   an unprivileged process map exactly one uid: the runner's own, which appears inside as the
//   sandbox uid. The agent and the sandbox's commands are therefore the same user; nothing of
//   the host but the bound paths is visible, and the pid namespace hides every other process.
// - Limits: a delegated cgroup v2 subtree (the runner's own group under systemd `Delegate=yes`,
//   where the runner may write `cgroup.subtree_control`) enforces memory, CPU and pids. Without
//   one, pids still hold through RLIMIT_NPROC set inside the sandbox's user namespace (the kernel
//   counts it per user namespace, so each sandbox has its own count, which sandbox code cannot
//   raise); memory and CPU are not enforced, and a request that names them is refused.
// - Disk: a workspace is a plain directory in the state dir (loop mounts need root), so
//   `diskBytes` is never enforced rootless.
import { spawnSync } from 'node:child_process'
import { accessSync, constants, existsSync } from 'node:fs'
import { join } from 'node:path'
import type { SandboxLimits } from '@conch/protocol'
import { type CgroupDetectOptions, type Cgroups, detectCgroups } from './cgroups.ts'
import { cgroupsFor } from './host-cgroups.ts'

/** The limit fields a rootless sandbox without cgroups cannot enforce. */
const CGROUP_ONLY: readonly (keyof SandboxLimits)[] = ['memoryBytes', 'cpus']

/** How to get memory and CPU limits as a non-root runner. */
const HOW_TO_DELEGATE =
  'run the runner in a systemd unit with Delegate=yes (systemd-run --user -p Delegate=yes ..., or a system unit with User= and Delegate=yes) on a cgroup v2 host, or run it as root'

/** True when this process is not root, so the namespace driver runs rootless. */
export function runsRootless(): boolean {
  return process.getuid?.() !== 0
}

/** Why bubblewrap cannot make an unprivileged user namespace here, or null when it can (cached per bwrap path). */
export function userNamespaceProblem(bwrap: string, sh: string): string | null {
  const cached = probes.get(bwrap)
  if (cached !== undefined) return cached
  const result = spawnSync(
    bwrap,
    ['--unshare-user', '--unshare-pid', '--unshare-net', '--ro-bind', '/', '/', '--', sh, '-c', 'exit 0'],
    { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000, env: {} },
  )
  const problem =
    result.status === 0
      ? null
      : `bubblewrap cannot create an unprivileged user namespace here (${(result.stderr || result.error?.message || `exit ${result.status}`).trim()}); allow them (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1 where it exists, or an AppArmor profile for bwrap on Ubuntu 24.04), or run the runner as root`
  probes.set(bwrap, problem)
  return problem
}
const probes = new Map<string, string | null>()

/** What a rootless runner can enforce on this host. */
export interface RootlessLimits {
  /** The delegated cgroup v2 subtree, or null when there is none. */
  cgroups: Cgroups | null
  /** Why there is no delegated subtree (and how to get one); null when there is. */
  missing: string | null
}

/**
 * Detects a cgroup v2 subtree this non-root runner may manage: its own group, when it can write
 * that group's cgroup.subtree_control. Whoever delegated it (systemd's `Delegate=yes`, or an
 * operator who chowned the dir and its cgroup.procs, cgroup.subtree_control and cgroup.threads),
 * only the runner's own group can be its subtree.
 */
export function rootlessLimits(options: CgroupDetectOptions = {}): RootlessLimits {
  const host = detectCgroups({ systemd: true, ...options })
  if (host.version === null) return { cgroups: null, missing: `${host.problem}; ${HOW_TO_DELEGATE}` }
  if (host.version === 1) {
    return {
      cgroups: null,
      missing: `this host's cgroups are v1, which only root may manage; ${HOW_TO_DELEGATE}`,
    }
  }
  const control = join(host.createsSubtree ? host.mount : host.delegated, 'cgroup.subtree_control')
  if (!(options.writable ?? canWrite)(control)) {
    return {
      cgroups: null,
      missing: `${control} is not writable by uid ${options.uid ?? process.getuid?.()}; ${HOW_TO_DELEGATE}`,
    }
  }
  return { cgroups: cgroupsFor(host), missing: null }
}

/** Why `limits` cannot be enforced by a rootless sandbox with `host`'s limits, or null. */
export function rootlessLimitsProblem(limits: SandboxLimits, host: RootlessLimits): string | null {
  const problems: string[] = []
  const cgroupAsked = CGROUP_ONLY.filter((k) => limits[k] !== undefined)
  if (host.cgroups === null && cgroupAsked.length > 0) {
    problems.push(
      `${cgroupAsked.join(' and ')} cannot be enforced by a runner that is not root without a delegated cgroup v2 subtree (${host.missing})`,
    )
  }
  if (limits.diskBytes !== undefined) {
    problems.push(
      'diskBytes cannot be enforced by a runner that is not root (a disk limit loop-mounts an ext4 image, which needs root); leave it out, or run the runner as root',
    )
  }
  return problems.length === 0 ? null : problems.join('; ')
}

/** The part of the runner's default limits a rootless sandbox enforces with `host`'s limits. */
export function rootlessDefaults(defaults: SandboxLimits, host: RootlessLimits): SandboxLimits {
  const { memoryBytes, cpus, pids } = defaults
  const out: SandboxLimits = {}
  if (pids !== undefined) out.pids = pids
  if (host.cgroups !== null) {
    if (memoryBytes !== undefined) out.memoryBytes = memoryBytes
    if (cpus !== undefined) out.cpus = cpus
  }
  return out
}

/** The limits a rootless sandbox does not enforce with `host`'s limits, for its description and the startup log. */
export function rootlessUnenforced(host: RootlessLimits): string {
  return host.cgroups === null ? 'memory, CPU and disk limits' : 'disk limits'
}

function canWrite(path: string): boolean {
  try {
    accessSync(path, constants.W_OK)
    return existsSync(path)
  } catch {
    return false
  }
}
