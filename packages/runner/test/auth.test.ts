import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ERROR_STATUS, ErrorBody } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { generateToken, hashSecret } from '../src/credentials.ts'
import { StateStore } from '../src/state-store.ts'
import { startRunner } from './runner-fixture.ts'

const A = 'sb_aaaaaaaaaaaaaaaa'
const B = 'sb_bbbbbbbbbbbbbbbb'

/** A runner with two stored sandboxes whose agents are gone, and tokens for them. */
async function runnerWithSandboxes(now = () => 1_000_000) {
  const stateDir = mkdtempSync(join(tmpdir(), 'conch-auth-'))
  const store = StateStore.open(stateDir)
  const tokens: Record<string, string> = {}
  for (const id of [A, B]) {
    store.putSandbox({
      id,
      status: 'dead',
      driver: 'local',
      isolation: 'none',
      description: 'd',
      workdir: '/nowhere',
      limits: {},
      metadata: {},
      env: {},
      idleTimeoutMs: null,
      hibernateAfterMs: null,
      sessionIdleTimeoutMs: null,
      createdAt: 1,
      deadReason: 'test',
      driverState: { dir: '/nowhere', socketDir: '/nowhere/link', linkSecret: '0'.repeat(64) },
    })
  }
  store.close()
  const fresh = await startRunner({ now, stateDir, removeStateDir: true })
  for (const id of [A, B]) {
    const token = generateToken()
    fresh.app.conch.store.addToken({ hash: hashSecret(token), sandboxId: id, expiresAt: 2_000_000 }, now())
    tokens[id] = token
  }
  const expired = generateToken()
  fresh.app.conch.store.addToken({ hash: hashSecret(expired), sandboxId: A, expiresAt: 999_999 }, 0)
  return { runner: fresh, tokens, expired }
}

function expectError(res: { statusCode: number; json(): unknown }, code: keyof typeof ERROR_STATUS): void {
  expect(res.statusCode).toBe(ERROR_STATUS[code])
  expect(ErrorBody.parse(res.json()).error.code).toBe(code)
}

describe('auth', () => {
  it('answers health checks without credentials', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({ method: 'GET', url: '/healthz' })
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ ok: true })
    expect((await runner.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({ ok: true })
  })

  it('rejects requests without credentials or with a wrong key as UNAUTHORIZED', async () => {
    await using runner = await startRunner()
    expectError(await runner.app.inject({ method: 'GET', url: '/v1/sandboxes' }), 'UNAUTHORIZED')
    expectError(
      await runner.app.inject({
        method: 'GET',
        url: '/v1/sandboxes',
        headers: { authorization: 'Bearer conch_nope' },
      }),
      'UNAUTHORIZED',
    )
    expectError(
      await runner.app.inject({
        method: 'GET',
        url: '/v1/sandboxes',
        headers: { authorization: 'Basic abc' },
      }),
      'UNAUTHORIZED',
    )
    expectError(await runner.app.inject({ method: 'GET', url: '/metrics' }), 'UNAUTHORIZED')
  })

  it('accepts the API key', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: runner.auth })
    expect(res.statusCode).toBe(200)
    expect(res.json()).toEqual({ sandboxes: [] })
  })

  it('lets a sandbox token reach only its own sandbox', async () => {
    const { runner, tokens } = await runnerWithSandboxes()
    await using _ = runner
    const own = await runner.app.inject({
      method: 'GET',
      url: `/v1/sandboxes/${A}`,
      headers: { authorization: `Bearer ${tokens[A]}` },
    })
    expect(own.statusCode).toBe(200)
    expect(own.json()).toMatchObject({ id: A, status: 'dead' })
    expectError(
      await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${B}`,
        headers: { authorization: `Bearer ${tokens[A]}` },
      }),
      'FORBIDDEN',
    )
    expectError(
      await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${B}/files/list?path=/workspace`,
        headers: { authorization: `Bearer ${tokens[A]}` },
      }),
      'FORBIDDEN',
    )
  })

  it('refuses sandbox tokens on listing and creating sandboxes, minting tokens and metrics', async () => {
    const { runner, tokens } = await runnerWithSandboxes()
    await using _ = runner
    const headers = { authorization: `Bearer ${tokens[A]}` }
    expectError(await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers }), 'FORBIDDEN')
    expectError(
      await runner.app.inject({ method: 'POST', url: '/v1/sandboxes', headers, payload: {} }),
      'FORBIDDEN',
    )
    expectError(
      await runner.app.inject({ method: 'POST', url: `/v1/sandboxes/${A}/tokens`, headers, payload: {} }),
      'FORBIDDEN',
    )
    expectError(await runner.app.inject({ method: 'GET', url: '/metrics', headers }), 'FORBIDDEN')
  })

  it('rejects an expired token and an unknown token as UNAUTHORIZED', async () => {
    const { runner, expired } = await runnerWithSandboxes()
    await using _ = runner
    expectError(
      await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${A}`,
        headers: { authorization: `Bearer ${expired}` },
      }),
      'UNAUTHORIZED',
    )
    expectError(
      await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${A}`,
        headers: { authorization: `Bearer ${generateToken()}` },
      }),
      'UNAUTHORIZED',
    )
  })

  it('mints tokens that expire after their TTL and caps the TTL at 24 hours', async () => {
    let clock = 1_000_000
    const { runner } = await runnerWithSandboxes(() => clock)
    await using _ = runner
    const minted = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${A}/tokens`,
      headers: runner.auth,
      payload: { ttlMs: 5_000 },
    })
    expect(minted.statusCode).toBe(200)
    const { token, expiresAt, sandboxId } = minted.json() as {
      token: string
      expiresAt: number
      sandboxId: string
    }
    expect(token).toMatch(/^cst_/)
    expect({ expiresAt, sandboxId }).toEqual({ expiresAt: 1_005_000, sandboxId: A })
    const headers = { authorization: `Bearer ${token}` }
    expect((await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${A}`, headers })).statusCode).toBe(
      200,
    )
    clock += 5_000
    expectError(
      await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${A}`, headers }),
      'UNAUTHORIZED',
    )
    expectError(
      await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${A}/tokens`,
        headers: runner.auth,
        payload: { ttlMs: 86_400_001 },
      }),
      'BAD_REQUEST',
    )
  })

  it('answers unknown routes with a NOT_FOUND body', async () => {
    await using runner = await startRunner()
    expectError(
      await runner.app.inject({ method: 'GET', url: '/v2/nothing', headers: runner.auth }),
      'NOT_FOUND',
    )
  })

  it('answers an unknown sandbox with SANDBOX_NOT_FOUND and a dead one with SANDBOX_NOT_RUNNING', async () => {
    const { runner } = await runnerWithSandboxes()
    await using _ = runner
    expectError(
      await runner.app.inject({ method: 'GET', url: '/v1/sandboxes/sb_zzzzzzzzzzzz', headers: runner.auth }),
      'SANDBOX_NOT_FOUND',
    )
    expectError(
      await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${A}/sessions`, headers: runner.auth }),
      'SANDBOX_NOT_RUNNING',
    )
  })
})
