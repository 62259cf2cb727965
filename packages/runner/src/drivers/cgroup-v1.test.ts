// CgroupsV1 on this host's real cgroup v1 controllers: real processes join the groups the way
// the namespace driver's launcher does (its pid into every `join` file, commands into `work`),
// then a hog, a fork bomb, kill and remove run against the kernel. These tests need root on a
// cgroup v1 (or hybrid) host; they fail, never skip, elsewhere.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CgroupsV1 } from './cgroup-v1.ts'
import { detectCgroups, type SandboxCgroup } from './cgroups.ts'
import { AGENT_PIDS_RESERVE } from './work-cgroup.ts'

const MiB = 1024 * 1024

/** The v1 implementation for this host; throws when the host is not cgroup v1. */
function hostV1(): CgroupsV1 {
  const host = detectCgroups()
  if (host.version !== 1)
    throw new Error(`these tests need a cgroup v1 host; detection found ${JSON.stringify(host)}`)
  return new CgroupsV1({ controllers: host.controllers })
}

const made: Array<{ cgroups: CgroupsV1; group: SandboxCgroup }> = []
afterEach(async () => {
  for (const { cgroups, group } of made.splice(0)) await cgroups.remove(group)
})

/** Makes a sandbox group with a fresh id, removed after the test. */
function makeGroup(limits: Parameters<CgroupsV1['create']>[0]['limits']): {
  cgroups: CgroupsV1
  group: SandboxCgroup
} {
  const cgroups = hostV1()
  const group = cgroups.create({
    id: `sb_v1test_${randomBytes(4).toString('hex')}`,
    limits,
    agentReserveBytes: 32 * MiB,
  })
  made.push({ cgroups, group })
  return { cgroups, group }
}

/** Runs `script` in sh after joining the sandbox's groups (and `work` when asked), as the launcher does. */
function runIn(
  group: SandboxCgroup,
  script: string,
  work = false,
): {
  child: ChildProcess
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>
} {
  const files = [
    ...group.join,
    ...(work && group.work
      ? [group.work.procs, ...(group.work.pidsProcs ? [group.work.pidsProcs] : [])]
      : []),
  ]
  const child = spawn(
    '/bin/sh',
    ['-c', `for f in "$@"; do echo $$ > "$f" || exit 125; done; ${script}`, 'sh', ...files],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString()
  })
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString()
  })
  const exited = new Promise<{
    code: number | null
    signal: NodeJS.Signals | null
    stdout: string
    stderr: string
  }>((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })))
  return { child, exited }
}

describe('CgroupsV1 on this host', () => {
  it('writes the limits: pids.max, memory and memsw for the sandbox (with reserve) and work, the CFS quota', () => {
    const { group } = makeGroup({ memoryBytes: 64 * MiB, cpus: 0.5, pids: 50 })
    const host = detectCgroups()
    if (host.version !== 1) throw new Error('not v1')
    const dir = (controller: string): string => join(host.controllers[controller] ?? '', 'conch', group.id)
    const read = (path: string): number => Number(readFileSync(path, 'utf8'))
    expect(read(join(dir('pids'), 'pids.max'))).toBe(50 + AGENT_PIDS_RESERVE)
    expect(read(join(dir('pids'), 'work', 'pids.max'))).toBe(50)
    expect(read(join(dir('memory'), 'memory.limit_in_bytes'))).toBe(96 * MiB)
    expect(read(join(dir('memory'), 'work', 'memory.limit_in_bytes'))).toBe(64 * MiB)
    if (existsSync(join(dir('memory'), 'memory.memsw.limit_in_bytes'))) {
      expect(read(join(dir('memory'), 'work', 'memory.memsw.limit_in_bytes'))).toBe(64 * MiB)
    }
    expect(read(join(dir('cpu'), 'cpu.cfs_quota_us'))).toBe(50_000)
    expect(group.join).toContain(join(dir('cpuacct'), 'cgroup.procs'))
  })

  it('OOM-kills a memory hog in work, counts the kill, and records the peak', async () => {
    const { cgroups, group } = makeGroup({ memoryBytes: 64 * MiB })
    const hog = runIn(group, `exec perl -e '$x = "a" x (512 * 1024 * 1024); print "survived\\n"'`, true)
    const result = await hog.exited
    expect(result.stdout).not.toContain('survived')
    expect(result.signal).toBe('SIGKILL')
    const stats = cgroups.stats(group)
    expect(stats?.oomKills).toBeGreaterThanOrEqual(1)
    expect(stats?.memoryPeakBytes).toBeGreaterThan(32 * MiB)
    expect(stats?.memoryPeakBytes).toBeLessThanOrEqual(96 * MiB)
  })

  it("stops a fork bomb in work at the pids limit, keeps the agent's reserve above it, and kill leaves the group empty", async () => {
    const { cgroups, group } = makeGroup({ pids: 20 })
    const bomb = runIn(group, 'i=0; while [ $i -lt 100 ]; do sleep 600 & i=$((i+1)); done; wait', true)
    // The shell reports the first fork the pids limit refused.
    await new Promise<void>((resolve) => {
      let stderr = ''
      const onData = (d: Buffer): void => {
        stderr += d.toString()
        if (/fork|Resource temporarily unavailable/i.test(stderr)) {
          bomb.child.stderr?.off('data', onData)
          resolve()
        }
      }
      bomb.child.stderr?.on('data', onData)
    })
    expect(cgroups.pids(group).length).toBeLessThanOrEqual(20)
    expect(cgroups.stats(group)?.pids).toBeLessThanOrEqual(20)
    // A process outside work (where the agent lives) still forks while work is full.
    const agent = runIn(group, 'sh -c "echo forked"')
    expect(await agent.exited).toMatchObject({ code: 0, stdout: 'forked\n' })
    await cgroups.kill(group)
    expect(cgroups.pids(group)).toEqual([])
    await bomb.exited
  })

  it('counts CPU time through cpuacct', async () => {
    const { cgroups, group } = makeGroup({ cpus: 1 })
    const burn = runIn(group, `exec perl -e 'my $x = 0; $x += $_ for 1 .. 3_000_000'`)
    expect((await burn.exited).code).toBe(0)
    expect(cgroups.stats(group)?.cpuSeconds).toBeGreaterThan(0)
  })

  it('removes every group dir, killing what is still inside; stats are null after', async () => {
    const { cgroups, group } = makeGroup({ memoryBytes: 64 * MiB, pids: 50 })
    const sleeper = runIn(group, 'sleep 600 & sleep 600 & echo started; wait', true)
    await new Promise<void>((resolve) => sleeper.child.stdout?.once('data', () => resolve()))
    expect(cgroups.pids(group).length).toBeGreaterThanOrEqual(3)
    await cgroups.remove(group)
    for (const dir of group.dirs) expect(existsSync(dir)).toBe(false)
    expect(cgroups.stats(group)).toBeNull()
    expect((await sleeper.exited).signal).toBe('SIGKILL')
  })
})
