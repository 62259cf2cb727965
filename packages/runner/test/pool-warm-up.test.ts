// The warm-up of a pooled sandbox's agent (pool-warm-up.ts), attacked by the client who takes
// the sandbox: it looks for the warm-up in the session list, its shell's history, environment
// and directory, the agent's processes and the files the agent holds. Real runner, real
// local-driver agent and bash.
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { SandboxInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { WARM_POOL_META_KEY } from '../src/pool-record.ts'
import { POOL_WARM_UP_RUNS } from '../src/pool-warm-up.ts'
import { startRunner, type TestRunner } from './runner-fixture.ts'

const WAIT = { timeout: 60_000, interval: 50 }
/** The word every warm-up command carries. */
const MARKER = 'conch-pool-warm-up'

async function takePooled(runner: TestRunner): Promise<SandboxInfo> {
  const { pool } = runner.app.conch.manager
  await vi.waitFor(() => expect(pool.readyIds()).toHaveLength(1), WAIT)
  const pooled = pool.readyIds()
  const res = await runner.app.inject({
    method: 'POST',
    url: '/v1/sandboxes',
    headers: runner.auth,
    payload: {},
  })
  const info = SandboxInfo.parse(res.json())
  expect(pooled).toContain(info.id)
  return info
}

async function run(runner: TestRunner, id: string, command: string): Promise<string> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/sessions/default/run`,
    headers: runner.auth,
    payload: { command },
  })
  return (res.json() as { stdout: string }).stdout
}

async function get<T>(runner: TestRunner, url: string): Promise<T> {
  return (await runner.app.inject({ method: 'GET', url, headers: runner.auth })).json() as T
}

/** The pids of a process's children. */
function children(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim()
  return text === '' ? [] : text.split(' ').map(Number)
}

/** The directories of the regular files `pid` holds open. */
function heldDirs(pid: number): string[] {
  const dirs = new Set<string>()
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`)
      if (target.startsWith('/') && statSync(target).isFile()) dirs.add(dirname(target))
    } catch {
      // An fd closed while listed, or one that is not a path.
    }
  }
  return [...dirs]
}

describe('the warm-up of a pooled sandbox', () => {
  // maxSandboxes 1: once the pooled sandbox is taken no other is started, so every agent and
  // file below is the taken sandbox's.
  it('ran before the sandbox was offered, and its session, history, env and cwd are nowhere to be found', async () => {
    await using runner = await startRunner({ warmPool: 1, limits: { maxSandboxes: 1 } })
    const info = await takePooled(runner)
    expect(runner.app.conch.manager.pool.warmUpRuns).toBe(POOL_WARM_UP_RUNS)

    const sessions = await get<{ sessions: { id: string }[] }>(runner, `/v1/sandboxes/${info.id}/sessions`)
    expect(sessions.sessions).toEqual([])
    const look = `history; echo "rc=$?"; pwd; env | grep -c -e CONCH_WARM_UP -e ${MARKER}`
    const seen = await run(runner, info.id, look)
    expect(seen).toBe(`rc=0\n${info.workdir}\n0\n`)
    const listed = await get<{ sessions: { id: string }[] }>(runner, `/v1/sandboxes/${info.id}/sessions`)
    expect(listed.sessions.map((s) => s.id)).toEqual(['default'])
    const history = await get<{ entries: { command: string }[] }>(
      runner,
      `/v1/sandboxes/${info.id}/sessions/default/history`,
    )
    expect(history.entries.map((e) => e.command)).toEqual([look])
  })

  it('left no process and no held file behind: the agent holds one shell and its files only', async () => {
    await using runner = await startRunner({ warmPool: 1, limits: { maxSandboxes: 1 } })
    const info = await takePooled(runner)
    const agent = Number(runner.app.conch.store.getSandbox(info.id)?.driverState.pid)
    const shell = Number(await run(runner, info.id, 'echo $$'))
    // The warm-up session's bash was killed with it; the user's shell is the agent's only child.
    expect(children(agent)).toEqual([shell])
    // The agent keeps its sessions' command files open: they are all in the user's shell's dir.
    const dirs = heldDirs(agent).filter((d) => readdirSync(d).some((f) => f.startsWith('cmd')))
    expect(dirs).toHaveLength(1)
    // Nothing the user can read holds the warm-up's commands: its files went with its session,
    // and no process carries them (the command lines are read first, then searched by bash, so
    // the search's own arguments are not among them).
    const found = await run(
      runner,
      info.id,
      [
        // The marker is put together at run time: this command's own file must not hold it.
        'm=conch-pool-; m+=warm-up',
        `grep -rl "$m" "$PWD" "$HOME" ${dirs[0]} 2>/dev/null`,
        `all=; for p in /proc/[0-9]*; do all+=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); all+=' '; done`,
        'case $all in *"$m"*) echo process;; *) echo none;; esac',
      ].join('\n'),
    )
    expect(found).toBe('none\n')
  })

  it('never offers a sandbox whose agent died during its warm-up: it is destroyed and replaced', async () => {
    await using runner = await startRunner({ warmPool: 1 })
    const { pool } = runner.app.conch.manager
    // The warm-up is under way: runs have ended, and the sandbox is not ready yet.
    await vi.waitFor(() => {
      expect(pool.warmUpRuns).toBeGreaterThan(0)
      expect(pool.readyIds()).toEqual([])
    }, WAIT)
    const recorded = JSON.parse(runner.app.conch.store.getMeta(WARM_POOL_META_KEY) ?? '[]') as {
      handle: { id: string; state: { pid?: number } }
    }[]
    expect(recorded).toHaveLength(1)
    const victim = recorded[0]!.handle
    process.kill(victim.state.pid!, 'SIGKILL')
    await vi.waitFor(() => expect(pool.readyIds()).toHaveLength(1), WAIT)
    expect(pool.readyIds()).not.toContain(victim.id)
    const taken = await takePooled(runner)
    expect(taken.id).not.toBe(victim.id)
    expect(await run(runner, taken.id, 'echo ok')).toBe('ok\n')
  })

  it('lets a create that needs the room of a warming sandbox have it without waiting for the warm-up', async () => {
    await using runner = await startRunner({ warmPool: 1, limits: { maxSandboxes: 1 } })
    const { pool } = runner.app.conch.manager
    await vi.waitFor(() => expect(pool.warmUpRuns).toBeGreaterThan(0), WAIT)
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { env: { COLD: '1' } },
    })
    expect(res.statusCode).toBe(200)
    const info = SandboxInfo.parse(res.json())
    expect(await run(runner, info.id, 'echo $COLD')).toBe('1\n')
    // The warm-up stopped at its next run and its sandbox gave up its room.
    expect(pool.warmUpRuns).toBeLessThan(POOL_WARM_UP_RUNS)
    expect(pool.total).toBe(0)
  })
})
