// A conformance target whose runner is an app in this process (runner-fixture.ts) on a fresh
// state dir, and whose host view is this machine's /proc, cgroupfs and the state dir.
import { type Dirent, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { descendantsOf, procStat } from '../src/drivers/proc-stat.ts'
import type { SandboxDriver } from '../src/drivers/sandbox-driver.ts'
import type {
  ConformanceRunner,
  ConformanceTarget,
  EnforcedLimit,
  SandboxFootprint,
} from './driver-conformance.ts'
import { startRunner } from './runner-fixture.ts'

/** Where cgroups are mounted on this host (v1 controllers below it, or the v2 tree). */
const CGROUP_ROOT = '/sys/fs/cgroup'

/** A target for a driver made by `make` on each runner's state dir. */
export function hostTarget(
  name: string,
  enforces: readonly EnforcedLimit[],
  make: (stateDir: string) => SandboxDriver | Promise<SandboxDriver>,
): ConformanceTarget {
  return {
    name,
    enforces,
    start: () => hostRunner(make, mkdtempSync(join(tmpdir(), `conch-conf-${name}-`))),
  }
}

/** A runner on `stateDir`; disposing it destroys its sandboxes and the dir, unless it was restarted. */
async function hostRunner(
  make: (stateDir: string) => SandboxDriver | Promise<SandboxDriver>,
  stateDir: string,
): Promise<ConformanceRunner> {
  const runner = await startRunner({ stateDir, driver: await make(stateDir), keepAgents: true })
  let handedOver = false
  return {
    async request(method, url, body) {
      const res = await runner.app.inject({
        method,
        url,
        headers: runner.auth,
        ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
      })
      return { status: res.statusCode, body: res.body === '' ? null : JSON.parse(res.body) }
    },
    async restart() {
      handedOver = true
      await runner[Symbol.asyncDispose]()
      return hostRunner(make, stateDir)
    },
    async footprint(sandboxId) {
      const record = runner.app.conch.manager.get(sandboxId).record
      const state = record.driverState
      const pids = new Set<number>()
      if (typeof state.pid === 'number') {
        pids.add(state.pid)
        for (const pid of descendantsOf(state.pid)) pids.add(pid)
      }
      const cgroupDirs = cgroupDirsOf(state)
      for (const dir of cgroupDirs) for (const pid of procsOf(dir)) pids.add(pid)
      const processes = [...pids].flatMap((pid) => {
        const stat = procStat(pid)
        return stat ? [{ pid, startTime: stat.startTime }] : []
      })
      return { id: sandboxId, processes, cgroupDirs }
    },
    async leftovers(footprint: SandboxFootprint) {
      const out: string[] = []
      for (const { pid, startTime } of footprint.processes) {
        const stat = procStat(pid)
        if (stat && stat.startTime === startTime && stat.state !== 'Z') out.push(`process ${pid} still runs`)
      }
      for (const pid of processesInCgroupsNamed(footprint.id))
        out.push(`process ${pid} is in a cgroup of the sandbox`)
      for (const pid of processesNaming(footprint.id))
        out.push(`process ${pid} still runs with the sandbox id in its command line`)
      for (const dir of footprint.cgroupDirs) if (existsSync(dir)) out.push(`cgroup ${dir} still exists`)
      for (const path of filesNamed(stateDir, footprint.id)) out.push(`state file ${path} still exists`)
      for (const point of mountsNamed(footprint.id)) out.push(`mount ${point} still exists`)
      return out
    },
    async [Symbol.asyncDispose]() {
      if (handedOver) return
      const driver = runner.driver
      const sandboxes = runner.app.conch.manager.list()
      await runner[Symbol.asyncDispose]()
      for (const s of sandboxes) {
        await driver.destroy({ id: s.id, workdir: s.record.workdir, state: s.record.driverState })
      }
      rmSync(stateDir, { recursive: true, force: true })
    },
  }
}

/**
 * The cgroup dirs a driver's state names: `cgroups: string[]`, a `cgroup` handle with `dirs`, or
 * an OCI `cgroupsPath` (gVisor), which runsc makes under every controller (v1) or the v2 mount.
 */
function cgroupDirsOf(state: Record<string, unknown>): string[] {
  const strings = (value: unknown): string[] =>
    Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []
  const handle = state.cgroup
  const fromHandle =
    handle !== null && typeof handle === 'object' ? strings((handle as { dirs?: unknown }).dirs) : []
  const fromPath =
    typeof state.cgroupsPath === 'string'
      ? [
          ...readdirSync(CGROUP_ROOT).map((controller) =>
            join(CGROUP_ROOT, controller, `${state.cgroupsPath}`),
          ),
          join(CGROUP_ROOT, state.cgroupsPath),
        ].filter((dir) => existsSync(join(dir, 'cgroup.procs')))
      : []
  return [...strings(state.cgroups), ...fromHandle, ...fromPath]
}

/** The mount points on this host whose path names the sandbox. */
function mountsNamed(id: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point.includes(id))
}

/** The pids in a cgroup dir; empty when it is gone. */
function procsOf(dir: string): number[] {
  try {
    return readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** Every process on the host whose /proc/<pid>/cgroup names a group called `id`. */
function processesInCgroupsNamed(id: string): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let text: string
    try {
      text = readFileSync(`/proc/${name}/cgroup`, 'utf8')
    } catch {
      continue
    }
    if (text.split('\n').some((line) => line.split('/').includes(id))) out.push(Number(name))
  }
  return out
}

/** Every live process on the host whose command line contains `id` (runsc's sentry and gofer, bwrap). */
function processesNaming(id: string): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let cmdline: string
    try {
      cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8')
    } catch {
      continue
    }
    if (cmdline.includes(id) && procStat(Number(name))?.state !== 'Z') out.push(Number(name))
  }
  return out
}

/** Paths under `dir` whose name contains `id`. */
function filesNamed(dir: string, id: string): string[] {
  const out: string[] = []
  const walk = (at: string): void => {
    let entries: Dirent[]
    try {
      entries = readdirSync(at, { withFileTypes: true })
    } catch {
      return
    }
    for (const entry of entries) {
      const path = join(at, entry.name)
      if (entry.name.includes(id)) out.push(path)
      if (entry.isDirectory()) walk(path)
    }
  }
  walk(dir)
  return out
}
