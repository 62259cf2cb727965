// Attacks from inside a sandbox on what serves it and on the host's resources: signal, ptrace
// or read the agent; exhaust memory, /tmp and the workspace disk. Every attack must fail or be
// contained, and the agent must keep serving the sandbox afterwards.
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DEFAULT_SANDBOX_LIMITS, SandboxInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { descendantsOf } from '../../src/drivers/proc-stat.ts'
import { exec, nsRunner } from '../namespace-runner.ts'
import { createSandbox, startRunner, type TestRunner } from '../runner-fixture.ts'

const MiB = 1024 * 1024
const REPO = fileURLToPath(new URL('../../../..', import.meta.url)).replace(/\/$/, '')

/** Shell that prints the pid of the agent as the sandbox sees it. */
const FIND_AGENT =
  'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null | grep -q "conch-agent" && echo ${p#/proc/}; done | head -1'

async function info(runner: TestRunner, id: string): Promise<SandboxInfo> {
  const res = await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })
  return SandboxInfo.parse(res.json())
}

describe('attack: reach the agent from inside the sandbox', () => {
  it('cannot signal, ptrace or read the agent, which keeps serving', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const pid = (await exec(runner, id, FIND_AGENT)).stdout.trim()
    expect(pid).toMatch(/^\d+$/)
    const r = await exec(
      runner,
      id,
      [
        `kill -9 ${pid} 2>&1; echo kill=$?`,
        `kill -STOP ${pid} 2>&1; echo stop=$?`,
        `cat /proc/${pid}/environ > /dev/null 2>&1; echo environ=$?`,
        `ls /proc/${pid}/fd > /dev/null 2>&1; echo fd=$?`,
        // ptrace(PTRACE_ATTACH = 16) and ptrace(PTRACE_SEIZE = 0x4206) through the raw syscall (101).
        `perl -e '$r = syscall(101, 16, ${pid}, 0, 0); print "attach=$r $!\\n"; $r = syscall(101, 0x4206, ${pid}, 0, 0); print "seize=$r $!\\n"'`,
        `grep -E "^Uid" /proc/${pid}/status`,
        // Moving the agent into the commands' memory group would expose it to their OOM kills.
        `echo ${pid} > /run/conch/cgroup.procs 2>/dev/null; echo move=$?`,
      ].join('; '),
    )
    expect(r.stdout).toMatch(/kill=1\n/)
    expect(r.stdout).toMatch(/stop=1\n/)
    expect(r.stdout).toMatch(/environ=1\n/)
    expect(r.stdout).toMatch(/fd=[12]\n/)
    expect(r.stdout).toMatch(/attach=-1 Operation not permitted\n/)
    expect(r.stdout).toMatch(/seize=-1 Operation not permitted\n/)
    expect(r.stdout).toMatch(/Uid:\t0\t0\t0\t0/)
    expect(r.stdout).toMatch(/move=[12]\n/)
    expect((await exec(runner, id, 'echo served')).stdout).toBe('served\n')
    expect((await info(runner, id)).status).toBe('running')
  })
})

describe('attack: reach the kernel through risky syscalls', () => {
  it('cannot create user namespaces or call keyctl, bpf, perf_event_open or io_uring_setup', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const r = await exec(
      runner,
      id,
      [
        'unshare -Ur true 2>/dev/null; echo unshare=$?',
        // keyctl 250, bpf 321, perf_event_open 298, io_uring_setup 425 (x86_64).
        `perl -e 'for (250, 321, 298, 425) { $r = syscall($_, 0, 0, 0, 0, 0); print "$_=$r $!\n" }'`,
        'echo still=ok',
      ].join('; '),
    )
    expect(r.stdout).toMatch(/unshare=1\n/)
    for (const nr of [250, 321, 298, 425]) expect(r.stdout).toContain(`${nr}=-1 Operation not permitted\n`)
    expect(r.stdout).toMatch(/still=ok\n$/)
  })
})

describe('attack: learn the host layout from inside the sandbox', () => {
  it('finds no host path (state dir, sandbox dir, checkout) in /proc/self/mountinfo', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const mountinfo = (await exec(runner, id, 'cat /proc/self/mountinfo')).stdout
    expect(mountinfo).toContain(' /workspace ')
    expect(mountinfo).toContain(' /opt/conch/node ')
    expect(mountinfo).not.toContain(runner.stateDir)
    expect(mountinfo).not.toContain(REPO)
    expect(mountinfo).not.toContain('.pnpm')
  })
})

describe('attack: exhaust the host from inside the sandbox', () => {
  it('OOM-kills a memory hog inside its limit; the agent, the shell and its state survive', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner, { limits: { memoryBytes: 128 * MiB } })
    await exec(runner, id, 'export KEPT=yes; cd /tmp', 'default')
    // Every command runs in the work group; the agent stays in the sandbox's own group.
    const groups = await exec(
      runner,
      id,
      `grep memory /proc/self/cgroup; ${FIND_AGENT} | xargs -I{} grep memory /proc/{}/cgroup`,
    )
    expect(groups.stdout).toMatch(/^\d+:memory:\/work\n\d+:memory:\/\n$/)
    const hog = await exec(
      runner,
      id,
      `perl -e '$x = "a" x (512 * 1024 * 1024); print "survived\\n"'`,
      'default',
    )
    expect(hog.stdout).not.toContain('survived')
    expect(hog.exitCode).toBe(137)
    expect(await exec(runner, id, 'echo $KEPT $(pwd)', 'default')).toMatchObject({ stdout: 'yes /tmp\n' })
    expect((await info(runner, id)).usage?.oomKills).toBeGreaterThanOrEqual(1)
    expect((await exec(runner, id, 'grep oom_kill /run/conch/oom_events')).stdout).toMatch(/oom_kill [1-9]/)
    expect((await info(runner, id)).status).toBe('running')
  })

  it('keeps /tmp and /dev/shm inside the memory budget: filling them gets ENOSPC, not host RAM', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner, { limits: { memoryBytes: 256 * MiB } })
    const r = await exec(
      runner,
      id,
      'head -c 400M /dev/zero 2>&1 > /tmp/fill; echo tmp=$?; head -c 400M /dev/zero 2>&1 > /dev/shm/fill; echo shm=$?; df -B1 --output=size /tmp /dev/shm | tail -2',
    )
    expect(r.stdout).toMatch(/No space left on device\ntmp=1\n/)
    expect(r.stdout).toMatch(/No space left on device\nshm=1\n/)
    const sizes = r.stdout.trim().split('\n').slice(-2).map(Number)
    expect(sizes).toEqual([128 * MiB, 64 * MiB])
    expect((await exec(runner, id, 'rm /tmp/fill /dev/shm/fill; echo ok')).stdout).toBe('ok\n')
  })

  it('enforces the workspace disk limit: a write past it gets ENOSPC and the host file stays bounded', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner, { limits: { diskBytes: 64 * MiB } })
    const r = await exec(runner, id, 'head -c 100M /dev/zero 2>&1 > /workspace/fill; echo rc=$?')
    expect(r.stdout).toMatch(/No space left on device\nrc=1\n/)
    const image = join(runner.stateDir, 'sandboxes', id, 'disk.img')
    expect(statSync(image).blocks * 512).toBeLessThanOrEqual(64 * MiB)
    expect(
      (await exec(runner, id, 'rm /workspace/fill && echo 1 > /workspace/small && cat small')).stdout,
    ).toBe('1\n')
  })

  it('gives a sandbox created without limits the protective defaults, enforced in its cgroups', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const created = await info(runner, id)
    expect(created.limits).toEqual(DEFAULT_SANDBOX_LIMITS)
    expect(created.usage?.memoryBytes).toBeGreaterThan(0)
    expect(created.usage?.pids).toBeGreaterThan(0)
    const cgroup = '/sys/fs/cgroup'
    const read = (path: string): string => String(Number(readFileSync(path, 'utf8')))
    expect(read(join(cgroup, 'memory/conch', id, 'work/memory.limit_in_bytes'))).toBe(String(1024 * MiB))
    expect(read(join(cgroup, 'pids/conch', id, 'pids.max'))).toBe('1024')
    expect(read(join(cgroup, 'cpu/conch', id, 'cpu.cfs_quota_us'))).toBe('100000')
    expect((await exec(runner, id, 'df -B1 --output=size /workspace | tail -1')).stdout.trim()).toMatch(
      /^\d+$/,
    )
  })

  it('refuses limits the local driver cannot enforce, with a 400 that says why', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { limits: { memoryBytes: 256 * MiB } },
    })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.message).toMatch(/local driver cannot enforce limits \(memoryBytes\)/)
  })
})

describe('fault: the agent dies', () => {
  it('reports a sandbox whose agent was SIGKILLed from outside as dead, with the reason', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const victim = await createSandbox(runner)
    const state = runner.app.conch.manager.get(id).record.driverState
    const agent = descendantsOf(Number(state.pid)).find((pid) =>
      readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('conch-agent'),
    )
    if (agent === undefined) throw new Error('no agent process below the sandbox')
    process.kill(agent, 'SIGKILL')
    await vi.waitFor(
      async () => {
        const dead = await info(runner, id)
        expect(dead.status).toBe('dead')
        expect(dead.deadReason).toMatch(/SIGKILL/)
      },
      { timeout: 45_000, interval: 100 },
    )
    expect((await exec(runner, victim, 'echo unharmed')).stdout).toBe('unharmed\n')
  }, 60_000)
})
