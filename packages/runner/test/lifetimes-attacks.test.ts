// Attacks on idle lifetimes: another sandbox's token, hostile option values, a keep-alive
// spammer, a sandbox that starts too many keep-alive processes. Real runner and agents, fake clock.
import { describe, expect, it } from 'vitest'
import { create, IDLE, info, lifetimeRunner, MIN, status, token } from './lifetime-fixture.ts'
import { startRunner } from './runner-fixture.ts'

describe('attacks on lifetimes', () => {
  it('a sandbox token cannot wake, keep alive or hibernate another sandbox', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const a = await create(runner, { ...IDLE, hibernateAfterMs: null })
    const b = await create(runner, IDLE)
    const tokenA = await token(runner, a)
    await sweep(10 * MIN)
    expect(status(runner, b)).toBe('hibernated')
    const tries = [
      { method: 'POST' as const, url: `/v1/sandboxes/${b}/keep-alive`, payload: { durationMs: 60 * MIN } },
      { method: 'POST' as const, url: `/v1/sandboxes/${b}/exec`, payload: { command: 'true' } },
      { method: 'GET' as const, url: `/v1/sandboxes/${b}/sessions` },
      { method: 'POST' as const, url: `/v1/sandboxes/${b}/hibernate` },
    ]
    for (const t of tries) {
      const res = await runner.app.inject({ ...t, headers: tokenA })
      expect(res.statusCode, `${t.method} ${t.url}`).toBe(403)
    }
    expect(status(runner, b)).toBe('hibernated')
    expect(runner.app.conch.manager.list().find((s) => s.id === b)?.keepAliveUntil).toBeNull()
    const own = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${a}/keep-alive`,
      headers: tokenA,
      payload: { durationMs: MIN },
    })
    expect(own.statusCode, own.body).toBe(200)
  })

  it('refuses hostile lifetime values with BAD_REQUEST', async () => {
    const { runner } = await lifetimeRunner()
    await using _ = runner
    const bad = [
      { hibernateAfterMs: -1 },
      { hibernateAfterMs: 0 },
      { hibernateAfterMs: 1.5 },
      { hibernateAfterMs: 1e15 },
      { hibernateAfterMs: '600000' },
      { sessionIdleTimeoutMs: -5 },
      { sessionIdleTimeoutMs: Number.MAX_SAFE_INTEGER },
      { idleTimeoutMs: 0.1 },
      { hibernateAfterMs: 60 * MIN, idleTimeoutMs: 60 * MIN },
    ]
    for (const payload of bad) {
      const res = await runner.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        headers: runner.auth,
        payload,
      })
      expect(res.statusCode, JSON.stringify(payload)).toBe(400)
      expect((res.json() as { error: { code: string } }).error.code).toBe('BAD_REQUEST')
    }
    expect(runner.app.conch.manager.list()).toHaveLength(0)
    const id = await create(runner, IDLE)
    for (const durationMs of [-1, 1.5, 1e15, '1000', null]) {
      const res = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/keep-alive`,
        headers: runner.auth,
        payload: { durationMs },
      })
      expect(res.statusCode, String(durationMs)).toBe(400)
      expect((res.json() as { error: { code: string } }).error.code).toBe('BAD_REQUEST')
    }
  })

  it('refuses hibernateAfterMs on a runner that keeps no snapshots, and never hibernates there', async () => {
    await using runner = await startRunner({ listen: true })
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { hibernateAfterMs: MIN },
    })
    expect(res.statusCode).toBe(400)
    expect((res.json() as { error: { message: string } }).error.message).toContain('keeps no snapshots')
    const id = await create(runner, {})
    expect((await info(runner, id)).hibernateAfterMs).toBeNull()
  })

  it('a keepAlive process holds its sandbox at most the runner cap, and a sandbox gets at most 16 of them', async () => {
    const { runner, sweep } = await lifetimeRunner({ limits: { maxKeepAliveMs: 30 * MIN } })
    await using _ = runner
    const id = await create(runner, { ...IDLE, idleTimeoutMs: 10 * 60 * MIN })
    const own = await token(runner, id)
    const start = () =>
      runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/processes`,
        headers: own,
        payload: { command: 'sleep 6000', keepAlive: true },
      })
    for (let i = 0; i < 16; i++) expect((await start()).statusCode).toBe(200)
    const refused = await start()
    expect(refused.statusCode).toBe(429)
    expect((refused.json() as { error: { code: string } }).error.code).toBe('RATE_LIMITED')
    await sweep(20 * MIN)
    expect(status(runner, id)).toBe('running')
    await sweep(10 * MIN)
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
  })

  it('a sandbox that spams keep-alive is held at most the runner cap', async () => {
    const { runner, clock, sweep } = await lifetimeRunner({ limits: { maxKeepAliveMs: 30 * MIN } })
    await using _ = runner
    const id = await create(runner, { ...IDLE, idleTimeoutMs: 10 * 60 * MIN })
    const own = await token(runner, id)
    const start = clock.now
    for (let i = 0; i < 50; i++) {
      const res = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/keep-alive`,
        headers: own,
        payload: { durationMs: 2_147_483_647 },
      })
      expect(res.statusCode).toBe(200)
      expect((res.json() as { keepAliveUntil: number }).keepAliveUntil).toBe(start + 30 * MIN)
    }
    await sweep(30 * MIN)
    expect(status(runner, id)).toBe('running')
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
  })
})
