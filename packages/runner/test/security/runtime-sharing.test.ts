// Every sandbox's agent runs the same Node binary and agent bundle from one read-only runtime
// image mounted once on the host (runtime-image.ts), so their file pages are one copy in the
// page cache, which is what lets a host hold many sandboxes (docs/MEMORY.md). Shared files are
// a channel between sandboxes only if code in one of them can change them, or reach them at all:
// these attacks try from inside one sandbox, and the host checks that both agents map the same
// files and that the second sandbox's runtime is unchanged afterwards.
import { createHash } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { descendantsOf } from '../../src/drivers/proc-stat.ts'
import { exec, nsRunner } from '../namespace-runner.ts'
import { createSandbox, type TestRunner } from '../runner-fixture.ts'

const RUNTIME = ['/opt/conch/node', '/opt/conch/conch-agent.mjs']

/** The host pid of a sandbox's agent. */
function agentPid(runner: TestRunner, id: string): number {
  const state = runner.app.conch.manager.get(id).record.driverState
  const agent = descendantsOf(Number(state.pid)).find((pid) =>
    readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('conch-agent'),
  )
  if (agent === undefined) throw new Error(`no agent process below sandbox ${id}`)
  return agent
}

/** Device, inode and content hash of each runtime file as the agent's mount namespace sees it. */
function runtimeAsSeenBy(pid: number): string[] {
  return RUNTIME.map((file) => {
    const path = `/proc/${pid}/root${file}`
    const { dev, ino } = statSync(path)
    return `${dev}:${ino}:${createHash('sha256').update(readFileSync(path)).digest('hex')}`
  })
}

describe('attack: change or reach the runtime that other sandboxes share', () => {
  it('can neither read nor change it, nor remount it; a second sandbox runs the same files unchanged', async () => {
    await using runner = await nsRunner()
    const a = await createSandbox(runner)
    const b = await createSandbox(runner)
    const before = runtimeAsSeenBy(agentPid(runner, b))
    // One copy: both agents map the same device and inode.
    expect(runtimeAsSeenBy(agentPid(runner, a))).toEqual(before)

    const r = await exec(
      runner,
      a,
      [
        'ls /opt/conch >/dev/null 2>&1; echo list=$?',
        'cat /opt/conch/conch-agent.mjs >/dev/null 2>&1; echo read=$?',
        'printf x >> /opt/conch/node 2>/dev/null; echo append=$?',
        'printf x > /opt/conch/conch-agent.mjs 2>/dev/null; echo truncate=$?',
        'touch /opt/conch/new 2>/dev/null; echo create=$?',
        'mv /opt/conch/conch-agent.mjs /tmp/moved 2>/dev/null; echo rename=$?',
        'chmod 777 /opt/conch 2>/dev/null; echo chmod=$?',
        'mount -o remount,rw /opt/conch/node 2>/dev/null; echo remount=$?',
        'mount --bind /tmp /opt/conch 2>/dev/null; echo bind=$?',
        'umount /opt/conch/conch-agent.mjs 2>/dev/null; echo umount=$?',
        // Through the agent's own view of its files.
        'for p in /proc/[0-9]*; do ls $p/root/opt/conch >/dev/null 2>&1 && echo via-proc=$p; done',
        'echo done',
      ].join('; '),
    )
    for (const op of [
      'list',
      'read',
      'append',
      'truncate',
      'create',
      'rename',
      'chmod',
      'remount',
      'bind',
      'umount',
    ]) {
      expect(r.stdout).toMatch(new RegExp(`(^|\\n)${op}=[1-9]\\d*\\n`))
    }
    expect(r.stdout).not.toContain('via-proc=')
    expect(r.stdout).toMatch(/done\n$/)

    // The host's view of the mounts: read-only in both sandboxes.
    for (const id of [a, b]) {
      const mounts = readFileSync(`/proc/${agentPid(runner, id)}/mountinfo`, 'utf8').split('\n')
      for (const file of RUNTIME) {
        const line = mounts.find((m) => m.split(' ')[4] === file)
        expect(line?.split(' ')[5]?.split(',')).toContain('ro')
      }
    }
    expect(runtimeAsSeenBy(agentPid(runner, b))).toEqual(before)
    expect((await exec(runner, b, 'echo still-served')).stdout).toBe('still-served\n')
    expect((await exec(runner, a, 'echo still-served')).stdout).toBe('still-served\n')
  })
})
