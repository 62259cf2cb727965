// The warm pool, attacked: concurrent creates, destroy-and-reuse, limits, secrets, restart.
// Real runner app, real local-driver agents; the pool's only injected side is the host's
// available memory.
import { existsSync, mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ErrorBody, SandboxInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { WARM_POOL_META_KEY } from '../src/pool-record.ts'
import { StateStore } from '../src/state-store.ts'
import { startRunner, type TestRunner } from './runner-fixture.ts'
import { destroyStateDir, runnerProcess } from './runner-process.ts'

const WAIT = { timeout: 30_000, interval: 50 }

async function create(runner: TestRunner, body: Record<string, unknown> = {}) {
  return runner.app.inject({ method: 'POST', url: '/v1/sandboxes', headers: runner.auth, payload: body })
}

async function created(runner: TestRunner, body: Record<string, unknown> = {}): Promise<SandboxInfo> {
  const res = await create(runner, body)
  if (res.statusCode !== 200) throw new Error(`create: ${res.statusCode} ${res.body}`)
  return SandboxInfo.parse(res.json())
}

async function exec(runner: TestRunner, id: string, command: string) {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/exec`,
    headers: runner.auth,
    payload: { command },
  })
  return res.json() as { stdout: string; exitCode: number }
}

async function destroy(runner: TestRunner, id: string): Promise<void> {
  await runner.app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers: runner.auth })
}

/** Sandbox folders on disk: every sandbox the driver holds, pooled or a client's. */
function sandboxDirs(runner: TestRunner): string[] {
  const dir = join(runner.stateDir, 'sandboxes')
  return existsSync(dir) ? readdirSync(dir) : []
}

async function poolFull(runner: TestRunner, n: number): Promise<string[]> {
  await vi.waitFor(() => expect(runner.app.conch.manager.pool.readyIds()).toHaveLength(n), WAIT)
  return runner.app.conch.manager.pool.readyIds()
}

async function metric(runner: TestRunner, name: string): Promise<number> {
  const text = (await runner.app.inject({ method: 'GET', url: '/metrics', headers: runner.auth })).body
  const line = text.split('\n').find((l) => l.startsWith(`${name}{driver="local"}`))
  return line === undefined ? 0 : Number(line.split(' ').at(-1))
}

function pidOf(runner: TestRunner, id: string): number {
  return Number(runner.app.conch.store.getSandbox(id)?.driverState.pid)
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe('warm pool', () => {
  it('answers a create with a pooled sandbox, applies metadata on take, and refills with new ones', async () => {
    await using runner = await startRunner({ warmPool: 2 })
    const pooled = await poolFull(runner, 2)
    const info = await created(runner, { metadata: { task: 't-1' }, idleTimeoutMs: 60_000 })
    expect(pooled).toContain(info.id)
    expect(info).toMatchObject({ status: 'running', metadata: { task: 't-1' } })
    expect(runner.app.conch.store.getSandbox(info.id)?.idleTimeoutMs).toBe(60_000)
    expect(await exec(runner, info.id, 'echo ok; ls -A')).toMatchObject({ stdout: 'ok\n', exitCode: 0 })
    // Like a cold sandbox it has no session yet: the agent's spare shell is not one.
    const listed = async (): Promise<string[]> => {
      const sessions = await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${info.id}/sessions`,
        headers: runner.auth,
      })
      return (sessions.json() as { sessions: { id: string }[] }).sessions.map((x) => x.id)
    }
    expect(await listed()).toEqual([])
    const first = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${info.id}/sessions/default/run`,
      headers: runner.auth,
      payload: { command: 'pwd; echo ${CONCH_API_KEY:-none}' },
    })
    expect(first.json()).toMatchObject({ stdout: `${info.workdir}\nnone\n`, exitCode: 0 })
    expect(await listed()).toEqual(['default'])
    expect(await metric(runner, 'conch_warm_pool_hits_total')).toBe(1)
    const refilled = await poolFull(runner, 2)
    expect(refilled).not.toContain(info.id)
  })

  it('never hands one pooled sandbox to two concurrent creates', async () => {
    await using runner = await startRunner({ warmPool: 2 })
    await poolFull(runner, 2)
    const infos = await Promise.all(Array.from({ length: 5 }, () => created(runner)))
    const ids = infos.map((i) => i.id)
    expect(new Set(ids).size).toBe(5)
    expect(new Set(infos.map((i) => i.workdir)).size).toBe(5)
    expect(new Set(ids.map((id) => pidOf(runner, id))).size).toBe(5)
    // Each sandbox writes its id and reads back only its own.
    for (const id of ids) await exec(runner, id, `echo ${id} > mine`)
    for (const id of ids) expect((await exec(runner, id, 'cat mine')).stdout).toBe(`${id}\n`)
    for (const id of runner.app.conch.manager.pool.readyIds()) expect(ids).not.toContain(id)
  })

  it('never returns a destroyed sandbox to the pool or hands it out again', async () => {
    await using runner = await startRunner({ warmPool: 1 })
    const [first] = await poolFull(runner, 1)
    const taken = await created(runner)
    expect(taken.id).toBe(first)
    const pid = pidOf(runner, taken.id)
    await destroy(runner, taken.id)
    expect(alive(pid)).toBe(false)
    const [next] = await poolFull(runner, 1)
    expect(next).not.toBe(taken.id)
    const again = await created(runner)
    expect(again.id).not.toBe(taken.id)
    expect(runner.app.conch.store.getMeta(WARM_POOL_META_KEY) ?? '').not.toContain(taken.id)
  })

  it('keeps clients plus pooled sandboxes within max-sandboxes', async () => {
    await using runner = await startRunner({ warmPool: 2, limits: { maxSandboxes: 2 } })
    const { manager } = runner.app.conch
    await poolFull(runner, 2)
    const a = await created(runner)
    await poolFull(runner, 1)
    expect(sandboxDirs(runner)).toHaveLength(2)
    const b = await created(runner)
    expect(manager.pool.total).toBe(0)
    const refused = await create(runner)
    expect(ErrorBody.parse(refused.json()).error.code).toBe('TOO_MANY_SANDBOXES')
    expect(sandboxDirs(runner)).toHaveLength(2)
    await destroy(runner, a.id)
    await poolFull(runner, 1)
    expect(sandboxDirs(runner)).toHaveLength(2)
    // A create the pool cannot serve (it gives env) takes the pooled sandbox's room.
    const withEnv = await created(runner, { env: { GREETING: 'hi' } })
    expect((await exec(runner, withEnv.id, 'echo $GREETING')).stdout).toBe('hi\n')
    expect(manager.pool.total).toBe(0)
    expect(sandboxDirs(runner).sort()).toEqual([b.id, withEnv.id].sort())
    expect(await metric(runner, 'conch_warm_pool_misses_total')).toBe(1)
  })

  it('does not fill while the host lacks the memory a pooled sandbox needs', async () => {
    let available = 0
    let checks = 0
    await using runner = await startRunner({
      warmPool: 2,
      availableMemoryBytes: () => {
        checks += 1
        return available
      },
    })
    await vi.waitFor(() => expect(checks).toBeGreaterThan(0), WAIT)
    expect(runner.app.conch.manager.pool.total).toBe(0)
    const cold = await created(runner)
    expect(await metric(runner, 'conch_warm_pool_misses_total')).toBe(1)
    available = 64 * 1024 ** 3
    await destroy(runner, cold.id)
    await poolFull(runner, 2)
  })

  it('gives every pooled sandbox its own id and link secret, and a token reaches only its own', async () => {
    await using runner = await startRunner({ warmPool: 2 })
    await poolFull(runner, 2)
    const a = await created(runner)
    const b = await created(runner)
    const secret = (id: string) => runner.app.conch.store.getSandbox(id)?.driverState.linkSecret
    expect(secret(a.id)).toMatch(/^[0-9a-f]{64}$/)
    expect(secret(a.id)).not.toBe(secret(b.id))
    const minted = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${a.id}/tokens`,
      headers: runner.auth,
      payload: {},
    })
    const { token } = minted.json() as { token: string }
    const stolen = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${b.id}/exec`,
      headers: { authorization: `Bearer ${token}` },
      payload: { command: 'true' },
    })
    expect(stolen.statusCode).toBeGreaterThanOrEqual(401)
    expect(stolen.statusCode).toBeLessThan(500)
  })

  it('does not count pooled sandboxes in the list or the /readyz load', async () => {
    await using runner = await startRunner({ warmPool: 2 })
    await poolFull(runner, 2)
    const list = await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: runner.auth })
    expect((list.json() as { sandboxes: unknown[] }).sandboxes).toEqual([])
    const ready = await runner.app.inject({ method: 'GET', url: '/readyz' })
    expect((ready.json() as { load: { sandboxes: number } }).load.sandboxes).toBe(0)
  })

  it('destroys its pooled sandboxes when the runner stops', async () => {
    // Disposed below as the step under test; `await using` covers a test that fails before it.
    await using runner = await startRunner({ warmPool: 2 })
    const ids = await poolFull(runner, 2)
    const recorded = JSON.parse(runner.app.conch.store.getMeta(WARM_POOL_META_KEY) ?? '[]') as {
      handle: { state: { pid: number } }
    }[]
    const pids = recorded.map((r) => r.handle.state.pid)
    expect(pids).toHaveLength(2)
    const dirs = ids.map((id) => join(runner.stateDir, 'sandboxes', id))
    await runner[Symbol.asyncDispose]()
    for (const pid of pids) expect(alive(pid)).toBe(false)
    for (const dir of dirs) expect(existsSync(dir)).toBe(false)
  })

  it('destroys the pooled sandboxes of a runner that was killed, at the next start', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-pool-'))
    const apiKey = `conch_${'a'.repeat(48)}`
    try {
      let pids: number[] = []
      {
        await using first = await runnerProcess(stateDir, apiKey, ['--warm-pool', '2'])
        await vi.waitFor(() => {
          const store = StateStore.open(stateDir)
          try {
            const recorded = JSON.parse(store.getMeta(WARM_POOL_META_KEY) ?? '[]') as {
              handle: { state: { pid?: number } }
            }[]
            pids = recorded.flatMap((r) => (r.handle.state.pid ? [r.handle.state.pid] : []))
          } finally {
            store.close()
          }
          expect(pids).toHaveLength(2)
        }, WAIT)
        first.child.kill('SIGKILL')
        await first.exited
      }
      for (const pid of pids) expect(alive(pid)).toBe(true)
      await using second = await runnerProcess(stateDir, apiKey, ['--warm-pool', '0'])
      await vi.waitFor(() => {
        for (const pid of pids) expect(alive(pid)).toBe(false)
      }, WAIT)
      second.child.kill('SIGTERM')
      await second.exited
    } finally {
      await destroyStateDir(stateDir)
    }
  })
})
