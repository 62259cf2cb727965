// Sandbox lifecycle with the real agent through the local driver.
import { existsSync } from 'node:fs'
import { ErrorBody, SandboxInfo, SandboxList } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { createSandbox, startRunner } from './runner-fixture.ts'

describe('sandboxes (local driver, real agent)', () => {
  it('creates a running sandbox that says it has no isolation, lists, gets and destroys it', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { metadata: { owner: 'test' }, env: { GREETING: 'hi' } },
    })
    expect(res.statusCode).toBe(200)
    const info = SandboxInfo.parse(res.json())
    expect(info).toMatchObject({
      status: 'running',
      driver: 'local',
      isolation: 'none',
      metadata: { owner: 'test' },
    })
    expect(info.description).toMatch(/NO isolation/)
    expect(existsSync(info.workdir)).toBe(true)

    const list = SandboxList.parse(
      (await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: runner.auth })).json(),
    )
    expect(list.sandboxes.map((s) => s.id)).toEqual([info.id])
    const got = await runner.app.inject({
      method: 'GET',
      url: `/v1/sandboxes/${info.id}`,
      headers: runner.auth,
    })
    expect(SandboxInfo.parse(got.json()).id).toBe(info.id)

    const run = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${info.id}/exec`,
      headers: runner.auth,
      payload: { command: 'echo $GREETING; echo ${CONCH_API_KEY:-none}' },
    })
    expect(run.json()).toMatchObject({ stdout: 'hi\nnone\n', exitCode: 0 })

    const gone = await runner.app.inject({
      method: 'DELETE',
      url: `/v1/sandboxes/${info.id}`,
      headers: runner.auth,
    })
    expect(gone.json()).toEqual({ ok: true })
    expect(existsSync(info.workdir)).toBe(false)
    const after = await runner.app.inject({
      method: 'GET',
      url: `/v1/sandboxes/${info.id}`,
      headers: runner.auth,
    })
    expect(ErrorBody.parse(after.json()).error.code).toBe('SANDBOX_NOT_FOUND')
  })

  it('refuses a sandbox beyond the limit with TOO_MANY_SANDBOXES', async () => {
    await using runner = await startRunner({ limits: { maxSandboxes: 1 } })
    await createSandbox(runner)
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    expect(res.statusCode).toBe(429)
    expect(ErrorBody.parse(res.json()).error.code).toBe('TOO_MANY_SANDBOXES')
  })

  it('marks a sandbox dead with the reason when its agent dies under a running runner', async () => {
    await using runner = await startRunner()
    const id = await createSandbox(runner)
    const record = runner.app.conch.manager.get(id).record
    process.kill(Number(record.driverState.pid), 'SIGKILL')
    await vi.waitFor(
      async () => {
        const res = await runner.app.inject({
          method: 'GET',
          url: `/v1/sandboxes/${id}`,
          headers: runner.auth,
        })
        expect(SandboxInfo.parse(res.json())).toMatchObject({
          status: 'dead',
          deadReason: 'agent killed by SIGKILL',
        })
      },
      { timeout: 15_000 },
    )
    const exec = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers: runner.auth,
      payload: { command: 'true' },
    })
    expect(exec.statusCode).toBe(409)
    expect(ErrorBody.parse(exec.json()).error.code).toBe('SANDBOX_NOT_RUNNING')
  })
})
