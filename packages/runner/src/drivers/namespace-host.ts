// What a host offers the namespace driver: whether it runs rootless, the tools and kernel
// features it needs, its cgroups (detected on first use: v1 or v2 as root, a delegated v2
// subtree or none rootless) and so which limits hold, and the words users and the startup log
// get about it.
import type { SandboxLimits } from '@conch/protocol'
import type { Cgroups } from './cgroups.ts'
import { hostCgroups } from './host-cgroups.ts'
import {
  type RootlessLimits,
  rootlessDefaults,
  rootlessLimits,
  rootlessLimitsProblem,
  rootlessUnenforced,
  userNamespaceProblem,
} from './rootless-host.ts'
import type { SandboxSpec } from './sandbox-driver.ts'
import { findBinary, SYSTEM_BIN_DIRS } from './sandbox-launch.ts'
import { diskProblem } from './workspace-disk.ts'

/** The host as the namespace driver sees it; nothing is probed until first asked. */
export class NamespaceHost {
  /** Whether sandboxes are made rootless (the runner is not root). */
  readonly rootless: boolean
  readonly #cgroupsGiven: Cgroups | undefined
  #cgroups: Cgroups | undefined
  readonly #rootlessGiven: RootlessLimits | undefined
  #rootlessLimits: RootlessLimits | undefined

  /** `cgroups` and `rootlessLimits` replace detection when given. */
  constructor(rootless: boolean, cgroups?: Cgroups, rootlessLimitsGiven?: RootlessLimits) {
    this.rootless = rootless
    this.#cgroupsGiven = cgroups
    this.#rootlessGiven = rootlessLimitsGiven
  }

  /** What users are told on every sandbox: what isolates it and which limits hold on this host. */
  get description(): string {
    const common =
      'own pid/mount/ipc/uts/user namespaces, no network but loopback, read-only system dirs, and a seccomp filter against the riskiest syscalls; it shares the host kernel, so a kernel bug the filter does not block can escape it'
    if (!this.rootless) {
      return `namespace driver: a bubblewrap sandbox as an unprivileged uid with no capabilities, ${common}; only its workspace is writable (its own disk), with cgroup limits on pids, memory and CPU`
    }
    const limits = this.limitsHere()
    return `namespace driver, rootless: a bubblewrap sandbox in an unprivileged user namespace with no capabilities, ${common}; its agent runs as the same user as its commands, so they can signal or trace it (ending only their own sandbox); its workspace is a directory on the runner's disk; ${limits.cgroups === null ? 'pids are limited (RLIMIT_NPROC) but ' : 'pids, memory and CPU are limited (delegated cgroup v2) but '}${rootlessUnenforced(limits)} are NOT enforced`
  }

  /** Rootless: the limits this host allows, detected on first use. */
  limitsHere(): RootlessLimits {
    this.#rootlessLimits ??= this.#rootlessGiven ?? rootlessLimits()
    return this.#rootlessLimits
  }

  /** The runner's default limits that can be enforced here: all as root, a subset rootless. */
  enforceableDefaults(defaults: SandboxLimits): SandboxLimits {
    return this.rootless ? rootlessDefaults(defaults, this.limitsHere()) : defaults
  }

  /** For the startup log: the limits that cannot be enforced here; null when all can. */
  hostWarning(): string | null {
    if (!this.rootless) return null
    const limits = this.limitsHere()
    return `the namespace driver runs rootless: ${rootlessUnenforced(limits)} are not enforced (sandboxes get only the enforceable defaults, and a create request that sets the others is refused)${limits.missing === null ? '' : `; for memory and CPU limits: ${limits.missing}`}`
  }

  /** Why this host cannot run namespace sandboxes with these limits, or null when it can. */
  problem(spec: Pick<SandboxSpec, 'limits'> = { limits: {} }): string | null {
    if (process.platform !== 'linux') return 'the namespace driver needs Linux'
    for (const name of this.rootless ? ['bwrap', 'sh'] : ['bwrap', 'unshare', 'setpriv', 'sleep', 'sh']) {
      if (!findBinary(name)) {
        return `${name} is not installed (looked in ${SYSTEM_BIN_DIRS.join(', ')}); install bubblewrap and util-linux`
      }
    }
    if (this.rootless) {
      const userns = userNamespaceProblem(findBinary('bwrap')!, findBinary('sh')!)
      if (userns) return userns
    }
    return this.limitsProblem(spec.limits)
  }

  /** The host's cgroups, detected on first use; throws with what is missing when there are none. */
  hostCgroups(): Cgroups {
    this.#cgroups ??= this.#cgroupsGiven ?? hostCgroups()
    return this.#cgroups
  }

  /** Why these limits cannot be enforced here (no usable cgroups, a missing controller, no loop devices), or null. */
  limitsProblem(limits: SandboxLimits): string | null {
    if (this.rootless) return rootlessLimitsProblem(limits, this.limitsHere())
    let cgroups: Cgroups
    try {
      cgroups = this.hostCgroups()
    } catch (error) {
      return error instanceof Error ? error.message : String(error)
    }
    return (
      cgroups.problem({ memoryBytes: limits.memoryBytes, cpus: limits.cpus, pids: limits.pids }) ??
      (limits.diskBytes === undefined ? null : diskProblem())
    )
  }

  /** The cgroups new sandboxes get: the delegated v2 subtree (or none) rootless, else the host's. */
  sandboxCgroups(): Cgroups | null {
    return this.rootless ? this.limitsHere().cgroups : this.hostCgroups()
  }

  /** The cgroups that made a sandbox's groups: the delegated v2 subtree rootless, else the host's. */
  cgroupsOf(version: 1 | 2): Cgroups {
    const rootless = this.rootless ? this.limitsHere().cgroups : null
    return rootless?.version === version ? rootless : this.hostCgroups()
  }
}
