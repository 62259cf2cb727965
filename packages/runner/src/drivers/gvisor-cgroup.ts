// The host cgroup runsc makes for a gVisor sandbox, from the OCI spec's `cgroupsPath`
// (`/conch-gvisor/<id>`): under every v1 controller, or below the v2 mount. It holds the whole
// sandbox (sentry, gofer, ptrace stubs), so its counters are what the sandbox costs the host:
// they are read through the same `Cgroups` implementations as the namespace driver's groups.
// runsc removes the processes with `delete`; the empty dirs it leaves are removed here.
import { readdirSync, readFileSync, rmdirSync } from 'node:fs'
import { join } from 'node:path'
import { CgroupsV1 } from './cgroup-v1.ts'
import { CgroupsV2 } from './cgroup-v2.ts'
import { type CgroupHost, type CgroupStats, detectCgroups, type SandboxCgroup } from './cgroups.ts'

/** The folder below each controller (v1) or the v2 mount where runsc makes the sandboxes' groups. */
const GVISOR_CGROUP_PARENT = 'conch-gvisor'

/** The OCI `cgroupsPath` of a sandbox. */
export function gvisorCgroupsPath(id: string): string {
  return `/${GVISOR_CGROUP_PARENT}/${id}`
}

/** What runsc's groups of one sandbox count; null when they are gone or the host has no cgroups. */
export function gvisorCgroupStats(id: string, host: CgroupHost = detectCgroups()): CgroupStats | null {
  const handle = (version: 1 | 2, dirs: string[]): SandboxCgroup => ({
    version,
    id,
    dirs,
    join: [],
    work: null,
    agentReserveBytes: 0,
  })
  switch (host.version) {
    case 1:
      return new CgroupsV1({ controllers: host.controllers, parent: GVISOR_CGROUP_PARENT }).stats(
        handle(1, []),
      )
    case 2: {
      const parent = join(host.mount, GVISOR_CGROUP_PARENT)
      return new CgroupsV2({ mount: host.mount, delegated: parent, createsSubtree: true }).stats(
        handle(2, [join(parent, id)]),
      )
    }
    default:
      return null
  }
}

/** How many times the host's OOM killer acted in the sandbox's memory group (v1 or v2); 0 when unknown. */
export function gvisorHostOomKills(id: string, root = '/sys/fs/cgroup'): number {
  const path = gvisorCgroupsPath(id)
  for (const file of [join(root, 'memory', path, 'memory.oom_control'), join(root, path, 'memory.events')]) {
    try {
      return Number(/^oom_kill (\d+)$/m.exec(readFileSync(file, 'utf8'))?.[1] ?? 0)
    } catch {
      // not this cgroup version
    }
  }
  return 0
}

/** Removes the sandbox's group dirs runsc left (empty once the container is deleted), v1 or v2. */
export function removeGvisorCgroups(id: string, root = '/sys/fs/cgroup'): void {
  let controllers: string[]
  try {
    controllers = readdirSync(root)
  } catch {
    return
  }
  const path = gvisorCgroupsPath(id)
  for (const dir of [...controllers.map((controller) => join(root, controller, path)), join(root, path)]) {
    try {
      rmdirSync(dir)
    } catch {
      // not there, or not a cgroup v1 controller dir
    }
  }
}
