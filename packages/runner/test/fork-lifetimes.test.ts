// A fork's idle settings against a real runner, real agents and a real snapshot store, on a fake
// clock: a fork inherits its snapshot's sandbox's `idleTimeoutMs`, `hibernateAfterMs` and
// `sessionIdleTimeoutMs` unless its create request names its own; a hibernated sandbox keeps
// its own when it wakes, across a restart too. The manifest is read back from disk, so the
// attacks tamper with it: a lifetime no runner writes is dropped or lowered, never trusted,
// and never crashes the runner.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { create, exec, info, lifetimeRunner, MIN, status } from './lifetime-fixture.ts'
import { type TestRunner, tempStateDir } from './runner-fixture.ts'

/** The source's settings: none of them a runner default. */
const SOURCE = { hibernateAfterMs: 7 * MIN, idleTimeoutMs: 45 * MIN, sessionIdleTimeoutMs: 3 * MIN }

/** Runner defaults unlike SOURCE, so an inherited value and a default cannot be confused. */
const DEFAULTS = {
  defaultHibernateAfterMs: 20 * MIN,
  defaultIdleTimeoutMs: 90 * MIN,
  defaultSessionIdleTimeoutMs: 30 * MIN,
}

/** The largest timeout the protocol carries. */
const MAX_TIMEOUT_MS = 2_147_483_647

async function snapshot(runner: TestRunner, id: string): Promise<string> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/snapshots`,
    headers: runner.auth,
    payload: {},
  })
  expect(res.statusCode, res.body).toBe(200)
  return (res.json() as { id: string }).id
}

async function fork(runner: TestRunner, payload: object) {
  return runner.app.inject({ method: 'POST', url: '/v1/sandboxes', headers: runner.auth, payload })
}

function lifetimes(record: Record<string, unknown>) {
  return {
    hibernateAfterMs: record.hibernateAfterMs,
    idleTimeoutMs: record.idleTimeoutMs,
    sessionIdleTimeoutMs: record.sessionIdleTimeoutMs,
  }
}

/** Rewrites a stored manifest's sandbox settings as someone with the state dir could. */
function tamper(runner: TestRunner, snapshotId: string, edit: (sandbox: Record<string, unknown>) => void) {
  const path = join(runner.stateDir, 'snapshots', 'manifests', `${snapshotId}.json`)
  const manifest = JSON.parse(readFileSync(path, 'utf8')) as { sandbox: Record<string, unknown> }
  edit(manifest.sandbox)
  writeFileSync(path, JSON.stringify(manifest))
}

describe('fork lifetimes', () => {
  it("a fork inherits its source's three idle settings and hibernates on the inherited timer", async () => {
    const { runner, sweep } = await lifetimeRunner({ limits: DEFAULTS })
    await using _ = runner
    const source = await create(runner, SOURCE)
    const snap = await snapshot(runner, source)
    const res = await fork(runner, { fromSnapshot: snap })
    expect(res.statusCode, res.body).toBe(200)
    const child = res.json() as { id: string }
    expect(lifetimes(await info(runner, child.id))).toEqual(SOURCE)

    await sweep(7 * MIN - 1)
    expect(status(runner, child.id)).toBe('running')
    await sweep(1)
    expect(status(runner, child.id)).toBe('hibernated')
  })

  it('a create request that names a setting overrides the inherited one, and only that one', async () => {
    const { runner } = await lifetimeRunner({ limits: DEFAULTS })
    await using _ = runner
    const snap = await snapshot(runner, await create(runner, SOURCE))
    const res = await fork(runner, {
      fromSnapshot: snap,
      hibernateAfterMs: null,
      sessionIdleTimeoutMs: 2 * MIN,
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(lifetimes(await info(runner, (res.json() as { id: string }).id))).toEqual({
      hibernateAfterMs: null,
      idleTimeoutMs: SOURCE.idleTimeoutMs,
      sessionIdleTimeoutMs: 2 * MIN,
    })
  })

  it('inherits "never" as never, not as the runner default', async () => {
    const { runner } = await lifetimeRunner({ limits: DEFAULTS })
    await using _ = runner
    const never = { hibernateAfterMs: null, idleTimeoutMs: null, sessionIdleTimeoutMs: null }
    const snap = await snapshot(runner, await create(runner, never))
    const res = await fork(runner, { fromSnapshot: snap })
    expect(res.statusCode, res.body).toBe(200)
    expect(lifetimes(await info(runner, (res.json() as { id: string }).id))).toEqual(never)
  })

  it('refuses, naming the snapshot, a requested idleTimeoutMs no longer than the inherited hibernateAfterMs', async () => {
    const { runner } = await lifetimeRunner({ limits: DEFAULTS })
    await using _ = runner
    const snap = await snapshot(runner, await create(runner, SOURCE))
    const before = runner.app.conch.manager.list().length
    const res = await fork(runner, { fromSnapshot: snap, idleTimeoutMs: 5 * MIN })
    expect(res.statusCode, res.body).toBe(400)
    const body = res.json() as { error: { code: string; message: string } }
    expect(body.error.code).toBe('BAD_REQUEST')
    expect(body.error.message).toContain(snap)
    expect(body.error.message).toContain('hibernateAfterMs')
    expect(body.error.message).not.toMatch(/\n\s+at /)
    expect(runner.app.conch.manager.list().length).toBe(before)
  })

  it("forks a snapshot without the fields (an older runner's) with the runner's defaults", async () => {
    const { runner } = await lifetimeRunner({ limits: DEFAULTS })
    await using _ = runner
    const snap = await snapshot(runner, await create(runner, SOURCE))
    tamper(runner, snap, (sandbox) => {
      delete sandbox.hibernateAfterMs
      delete sandbox.sessionIdleTimeoutMs
    })
    const res = await fork(runner, { fromSnapshot: snap })
    expect(res.statusCode, res.body).toBe(200)
    expect(lifetimes(await info(runner, (res.json() as { id: string }).id))).toEqual({
      hibernateAfterMs: DEFAULTS.defaultHibernateAfterMs,
      idleTimeoutMs: SOURCE.idleTimeoutMs,
      sessionIdleTimeoutMs: DEFAULTS.defaultSessionIdleTimeoutMs,
    })
  })
})

describe('fork lifetimes attacks', () => {
  it('drops a tampered lifetime that is negative, zero, fractional or of the wrong type, and takes the default', async () => {
    const { runner } = await lifetimeRunner({ limits: DEFAULTS })
    await using _ = runner
    const snap = await snapshot(runner, await create(runner, SOURCE))
    for (const hostile of [-5, 0, 1.5, 'soon', {}, [60_000], true]) {
      tamper(runner, snap, (sandbox) => {
        sandbox.hibernateAfterMs = hostile
        sandbox.sessionIdleTimeoutMs = hostile
      })
      const res = await fork(runner, { fromSnapshot: snap })
      expect(res.statusCode, `${JSON.stringify(hostile)}: ${res.body}`).toBe(200)
      const child = (res.json() as { id: string }).id
      expect(lifetimes(await info(runner, child))).toEqual({
        hibernateAfterMs: DEFAULTS.defaultHibernateAfterMs,
        idleTimeoutMs: SOURCE.idleTimeoutMs,
        sessionIdleTimeoutMs: DEFAULTS.defaultSessionIdleTimeoutMs,
      })
      await runner.app.inject({ method: 'DELETE', url: `/v1/sandboxes/${child}`, headers: runner.auth })
    }
  })

  it('lowers a tampered huge lifetime to the largest timeout, and drops one JSON reads as Infinity', async () => {
    const { runner } = await lifetimeRunner({ limits: DEFAULTS })
    await using _ = runner
    const snap = await snapshot(runner, await create(runner, SOURCE))
    const path = join(runner.stateDir, 'snapshots', 'manifests', `${snap}.json`)
    const text = readFileSync(path, 'utf8')
    writeFileSync(
      path,
      text
        .replace(`"hibernateAfterMs":${SOURCE.hibernateAfterMs}`, '"hibernateAfterMs":1e300')
        .replace(`"sessionIdleTimeoutMs":${SOURCE.sessionIdleTimeoutMs}`, '"sessionIdleTimeoutMs":1e400'),
    )
    const res = await fork(runner, { fromSnapshot: snap })
    expect(res.statusCode, res.body).toBe(200)
    expect(lifetimes(await info(runner, (res.json() as { id: string }).id))).toEqual({
      hibernateAfterMs: MAX_TIMEOUT_MS,
      idleTimeoutMs: SOURCE.idleTimeoutMs,
      sessionIdleTimeoutMs: DEFAULTS.defaultSessionIdleTimeoutMs,
    })
  })

  it('refuses a snapshot whose tampered idleTimeoutMs is not a timeout as damaged, and keeps serving', async () => {
    const { runner } = await lifetimeRunner({ limits: DEFAULTS })
    await using _ = runner
    const snap = await snapshot(runner, await create(runner, SOURCE))
    for (const hostile of [-1, 'forever', 1e300]) {
      tamper(runner, snap, (sandbox) => {
        sandbox.idleTimeoutMs = hostile
      })
      const res = await fork(runner, { fromSnapshot: snap })
      expect(res.statusCode, res.body).toBe(409)
      const body = res.json() as { error: { code: string; message: string } }
      expect(body.error.code).toBe('SNAPSHOT_INCOMPATIBLE')
      expect(body.error.message).toContain(snap)
    }
    const listed = await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: runner.auth })
    expect(listed.statusCode).toBe(200)
  })
})

describe('wake lifetimes', () => {
  it('a sandbox woken from hibernation keeps its own settings, across a restart with other defaults', async () => {
    using dir = tempStateDir('conch-fork-lifetimes-')
    const stateDir = dir.path
    const first = await lifetimeRunner({ stateDir, limits: DEFAULTS })
    await using _first = first.runner
    const id = await create(first.runner, SOURCE)
    await first.sweep(7 * MIN)
    expect(status(first.runner, id)).toBe('hibernated')
    expect((await exec(first.runner, id, 'true')).statusCode).toBe(200)
    expect(lifetimes(await info(first.runner, id))).toEqual(SOURCE)
    await first.sweep(7 * MIN)
    expect(status(first.runner, id)).toBe('hibernated')
    await first.runner[Symbol.asyncDispose]()

    const second = await lifetimeRunner({
      stateDir,
      limits: {
        defaultHibernateAfterMs: 2 * MIN,
        defaultIdleTimeoutMs: 4 * MIN,
        defaultSessionIdleTimeoutMs: MIN,
      },
    })
    await using _ = second.runner
    expect((await exec(second.runner, id, 'true')).statusCode).toBe(200)
    expect(lifetimes(await info(second.runner, id))).toEqual(SOURCE)
    await second.sweep(7 * MIN - 1)
    expect(status(second.runner, id)).toBe('running')
    await second.sweep(1)
    expect(status(second.runner, id)).toBe('hibernated')
  })
})
