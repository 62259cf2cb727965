// The namespace driver's limits on a real cgroup v2 kernel, through the SDK against the runner
// in the VM. Each limit is attacked from inside a sandbox (a memory hog, a fork bomb, a CPU-bound
// loop) and the test checks both that the kernel stopped it and that the sandbox's agent and
// shell were unharmed; destroy is checked from the guest's side (GuestInspector).
import { Sandbox } from '@conch/sdk'
import { test as base, describe, expect } from 'vitest'
import type { GuestInspector } from '../harness/guest-inspector.ts'
import { guestInspector, vmSandboxOptions } from './vm-fixture.ts'

const MiB = 1024 * 1024

/** The limits the attacks run under. */
const LIMITS = { memoryBytes: 128 * MiB, pids: 64, cpus: 0.2 }

/** Asks for 512 MiB at once, four times the sandbox's memory limit. */
const MEMORY_HOG = `perl -e '$x = "a" x (512 * 1024 * 1024); print "survived\\n"'`

/** Forks sleepers until the kernel refuses, reports how many it got, and reaps them. */
const FORK_BOMB = `perl -e 'my @k; for (1 .. 2000) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 300; exit 0 } push @k, $p } print "forked ", scalar(@k), "\\n"; kill 9, @k; waitpid($_, 0) for @k'`

/** Seconds the CPU-bound loop spins. */
const SPIN_SECONDS = 5

/** One limited sandbox for the whole file (sandboxes are slow to start under TCG), and the guest inspector. */
const test = base.extend<{ limited: Sandbox; inspector: GuestInspector }>({
  limited: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads fixture dependencies from this pattern
    async ({}, use) => {
      await using sandbox = await Sandbox.create({ ...vmSandboxOptions(), limits: LIMITS })
      await use(sandbox)
    },
    { scope: 'file' },
  ],
  inspector: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads fixture dependencies from this pattern
    async ({}, use) => use(await guestInspector()),
    { scope: 'file' },
  ],
})

/** Runs a command in the sandbox's `default` session, whose shell keeps its state. */
function inShell(sandbox: Sandbox, command: string) {
  return sandbox.exec(command, { sessionId: 'default', timeoutMs: 120_000 })
}

describe('cgroup v2 limits of the namespace driver in the VM', () => {
  test('OOM-kills a memory hog at limits.memoryBytes; its shell and the agent survive and usage counts the kill', async ({
    limited,
  }) => {
    await inShell(limited, 'export KEPT=memory')
    const hog = await inShell(limited, MEMORY_HOG)
    expect(hog).toMatchObject({ exitCode: 137, oomKilled: true })
    expect(hog.stdout).not.toContain('survived')
    expect(await inShell(limited, 'echo "$KEPT"')).toMatchObject({ stdout: 'memory\n', exitCode: 0 })
    const info = await limited.refresh()
    expect(info.status).toBe('running')
    expect(info.usage?.oomKills).toBeGreaterThanOrEqual(1)
  })

  test('stops a fork bomb at limits.pids; its shell keeps serving', async ({ limited }) => {
    await inShell(limited, 'export KEPT=pids')
    const bomb = await inShell(limited, FORK_BOMB)
    const forked = Number(/forked (\d+)/.exec(bomb.stdout)?.[1])
    expect(forked).toBeGreaterThan(0)
    expect(forked).toBeLessThan(LIMITS.pids)
    expect(await inShell(limited, 'echo "$KEPT"')).toMatchObject({ stdout: 'pids\n', exitCode: 0 })
    expect((await limited.refresh()).status).toBe('running')
  })

  test('throttles a CPU-bound loop to limits.cpus through cpu.max', async ({ limited, inspector }) => {
    const before = await limited.refresh()
    const startedAt = Date.now()
    const spin = await inShell(limited, `timeout ${SPIN_SECONDS} sh -c 'while :; do :; done'`)
    const after = await limited.refresh()
    const wallSeconds = (Date.now() - startedAt) / 1000
    expect(spin.exitCode).toBe(124)
    const cpuSeconds = (after.usage?.cpuSeconds ?? 0) - (before.usage?.cpuSeconds ?? 0)
    // Unthrottled, the loop alone takes a whole CPU; with 0.2 it gets at most a fifth of the
    // wall time (plus the agent's little work), so half a CPU is far above what it can get.
    expect(cpuSeconds).toBeGreaterThan(0)
    expect(cpuSeconds / wallSeconds).toBeLessThan(0.5)
    // And the kernel says it throttled the commands' group, with the quota conch wrote.
    const stat = await inspector.run(
      `d=$(find /sys/fs/cgroup -type d -path "*/${limited.id}/work"); cat "$d/cpu.max"; grep nr_throttled "$d/cpu.stat"`,
    )
    const [quota, throttled] = stat.trim().split('\n')
    expect(quota).toBe('20000 100000')
    expect(Number(throttled?.split(' ')[1])).toBeGreaterThan(0)
  })

  test('destroy kills everything in the sandbox cgroups and leaves no cgroup dir, process, mount or state file', async ({
    inspector,
  }) => {
    const sandbox = await Sandbox.create({ ...vmSandboxOptions(), limits: LIMITS })
    // Work that outlives its command: a background job, a detached session leader, and a
    // process that ignores the polite signals.
    await inShell(sandbox, 'sleep 600 > /dev/null 2>&1 &')
    await inShell(sandbox, 'setsid sleep 601 > /dev/null 2>&1 < /dev/null &')
    await inShell(sandbox, `sh -c 'trap "" TERM HUP INT; sleep 602' > /dev/null 2>&1 &`)
    const footprint = await inspector.footprint(sandbox.id)
    expect(footprint.cgroupDirs).toEqual(
      expect.arrayContaining([expect.stringMatching(new RegExp(`/conch/${sandbox.id}/work$`))]),
    )
    expect(footprint.processes.length).toBeGreaterThanOrEqual(4)
    await sandbox.destroy()
    expect(await inspector.leftovers(footprint)).toEqual([])
  })
})
