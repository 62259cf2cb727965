// The namespace driver starts a sandbox's process chain during `create`, so its cgroup joins
// overlap the disk's setup, and holds it before bwrap until `startAgent`. These tests attack that
// window: nothing of the sandbox may run before its start, a destroy without a start must leave
// nothing behind, and a runner that dies inside the window must not leave a chain that goes on
// to start bwrap with the options it never got. Real bubblewrap, cgroups and agent; they fail
// (never skip) when the host cannot run namespace sandboxes.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DEFAULT_SANDBOX_LIMITS } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import type { SandboxSpec } from '../src/drivers/sandbox-driver.ts'

const stateDir = mkdtempSync(join(tmpdir(), 'conch-ns-held-'))
afterAll(() => rmSync(stateDir, { recursive: true, force: true }))

function spec(): SandboxSpec {
  return {
    id: `sb_held${Math.random().toString(36).slice(2, 10)}`,
    env: {},
    limits: DEFAULT_SANDBOX_LIMITS,
    scrollbackBytes: 1 << 20,
    maxSessions: 8,
    linkSecret: mintLinkSecret(),
  }
}

/** The pids in a cgroup.procs file (none once it is gone). */
function members(procs: string): number[] {
  if (!existsSync(procs)) return []
  return readFileSync(procs, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map(Number)
}

/** A process's program name, or null once it is gone. */
function comm(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return null
  }
}

/** The sandbox's first cgroup.procs (the launcher joins it first). */
function firstProcs(state: unknown): string {
  const join = (state as { cgroup: { join: string[] } | null }).cgroup?.join
  if (!join?.[0]) throw new Error('the namespace sandbox has no cgroups; run the tests as root')
  return join[0]
}

describe('namespace driver: the chain held between create and start', () => {
  it('runs nothing of the sandbox before its start: the chain waits as root sh in its cgroups, with no bwrap and no agent', async () => {
    const driver = new NamespaceDriver({ stateDir })
    const problem = driver.problem(spec())
    if (problem) throw new Error(`this host cannot run namespace sandboxes: ${problem}`)
    const s = spec()
    const created = await driver.create(s)
    const procs = firstProcs(created.state)
    try {
      await vi.waitFor(() => expect(members(procs).length > 0, 'the chain to join the cgroups').toBe(true), {
        timeout: 10000,
        interval: 20,
      })
      // The chain is one root sh blocked reading its `go` channel; a chain that did not wait would
      // have exec'd bwrap and the agent instead, and never be seen blocked there.
      await vi.waitFor(
        () => {
          const pids = members(procs)
          expect(pids.map(comm)).toEqual(['sh'])
          expect(readFileSync(`/proc/${pids[0]}/wchan`, 'utf8')).toMatch(/pipe_read|unix_stream_read/)
        },
        { timeout: 10_000, interval: 20 },
      )
      const log = join((created.state as { dir: string }).dir, 'agent.log')
      expect(readFileSync(log, 'utf8')).toBe('')
      // Released, the same chain goes on to become the sandbox's bwrap.
      const started = await driver.startAgent(created, s)
      const pid = (started.state as { pid: number }).pid
      expect(members(procs)).toContain(pid)
      await vi.waitFor(() => expect(comm(pid) === 'bwrap', 'the released chain to exec bwrap').toBe(true), {
        timeout: 10000,
        interval: 20,
      })
    } finally {
      await driver.destroy(created)
    }
  })

  it('leaves no process, cgroup or folder when a created sandbox is destroyed without a start', async () => {
    const driver = new NamespaceDriver({ stateDir })
    const created = await driver.create(spec())
    const procs = firstProcs(created.state)
    await vi.waitFor(() => expect(members(procs).length > 0, 'the chain to join the cgroups').toBe(true), {
      timeout: 10000,
      interval: 20,
    })
    const [pid] = members(procs)
    await driver.destroy(created)
    expect(comm(pid!)).toBeNull()
    expect(existsSync(procs)).toBe(false)
    expect(existsSync((created.state as { dir: string }).dir)).toBe(false)
  })

  it('ends the chain before bwrap when the runner dies between create and start', async () => {
    // A runner process that creates a sandbox and exits at once: its end of the chain's pipes closes.
    const driverModule = fileURLToPath(new URL('../src/drivers/namespace-driver.ts', import.meta.url))
    const code = `
      import { NamespaceDriver } from ${JSON.stringify(driverModule)}
      const driver = new NamespaceDriver({ stateDir: ${JSON.stringify(stateDir)} })
      const created = await driver.create(${JSON.stringify(spec())})
      process.stdout.write(JSON.stringify(created.state))
      process.exit(0)
    `
    const out = spawnSync(process.execPath, ['--conditions=source', '--input-type=module', '-e', code], {
      encoding: 'utf8',
      timeout: 60_000,
    })
    expect(out.status, out.stderr).toBe(0)
    const state = JSON.parse(out.stdout) as { dir: string; cgroup: unknown }
    const procs = firstProcs(state)
    try {
      // The chain reads the closed pipe, exits before it execs setpriv, and bwrap never runs.
      await vi.waitFor(() => expect(members(procs).length === 0, 'the orphaned chain to exit').toBe(true), {
        timeout: 10000,
        interval: 20,
      })
      expect(readFileSync(join(state.dir, 'agent.log'), 'utf8')).toBe('')
    } finally {
      // Clean up what the dead runner left (its cgroups and disk), as a restarted runner would.
      const driver = new NamespaceDriver({ stateDir })
      await driver.destroy({ id: state.dir.split('/').at(-1)!, workdir: '/workspace', state })
    }
  })
})
