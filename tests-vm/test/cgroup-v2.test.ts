import { describe, expect, inject } from 'vitest'
import { test } from './vm-fixture.ts'

describe('the VM is a cgroup v2 host', () => {
  test('mounts a pure cgroup v2 hierarchy with the cpu, memory, pids and io controllers', () => {
    const { bootLine } = inject('vm')
    expect(bootLine).toMatch(/cgroup=cgroup2fs /)
    const controllers = /controllers=(\S+)/.exec(bootLine)?.[1]?.split(',') ?? []
    expect(controllers).toEqual(expect.arrayContaining(['cpu', 'memory', 'pids', 'io']))
  })

  test('shows a sandbox shell one unified cgroup and no v1 hierarchy', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    // Under cgroup v1 a process belongs to one group per hierarchy (`N:controller:/path`);
    // under pure v2 it has exactly one line, `0::/path`.
    const groups = await sh.run('cat /proc/self/cgroup')
    expect(groups.exitCode).toBe(0)
    expect(groups.stdout.trim().split('\n')).toEqual([expect.stringMatching(/^0::\//)])
    const v1 = await sh.run("grep -c ' - cgroup ' /proc/self/mountinfo")
    expect(v1.stdout.trim()).toBe('0')
  })
})
