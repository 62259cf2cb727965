// Attacks on the snapshot routes, through `inject` on a runner with the local driver and a
// snapshot store in its state dir: stolen or foreign tokens, ids that are paths, a sandbox
// filling the store, secrets leaking through the listing.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test as base, describe, expect } from 'vitest'
import { buildApp, type RunnerApp } from '../../src/app.ts'
import { generateApiKey, hashSecret } from '../../src/credentials.ts'
import { LocalDriver } from '../../src/drivers/local-driver.ts'
import { DEFAULT_SNAPSHOT_LIMITS, SnapshotStore } from '../../src/snapshots/snapshot-store.ts'
import { StateStore } from '../../src/state-store.ts'

interface Runner {
  app: RunnerApp
  stateDir: string
  admin: { authorization: string }
  sandbox(env?: Record<string, string>): Promise<{ id: string; token: { authorization: string } }>
}

const test = base.extend<{ runner: Runner }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take a destructuring pattern
  runner: async ({}, use) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-snap-routes-'))
    const apiKey = generateApiKey()
    const store = StateStore.open(stateDir)
    const app = buildApp({
      store,
      apiKeyHashes: [hashSecret(apiKey)],
      drivers: [new LocalDriver({ stateDir })],
      snapshotStore: new SnapshotStore(stateDir, { ...DEFAULT_SNAPSHOT_LIMITS, maxSnapshotsPerSandbox: 2 }),
    })
    await app.ready()
    const admin = { authorization: `Bearer ${apiKey}` }
    const ids: string[] = []
    await use({
      app,
      stateDir,
      admin,
      sandbox: async (env = {}) => {
        const created = await app.inject({
          method: 'POST',
          url: '/v1/sandboxes',
          headers: admin,
          payload: { env },
        })
        expect(created.statusCode, created.body).toBe(200)
        const id = (created.json() as { id: string }).id
        ids.push(id)
        const minted = await app.inject({
          method: 'POST',
          url: `/v1/sandboxes/${id}/tokens`,
          headers: admin,
          payload: {},
        })
        return { id, token: { authorization: `Bearer ${(minted.json() as { token: string }).token}` } }
      },
    })
    for (const id of ids) await app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers: admin })
    await app.close()
    store.close()
    rmSync(stateDir, { recursive: true, force: true })
  },
})

describe('attacks on the snapshot routes', () => {
  test("a sandbox token snapshots its own sandbox and nothing else: no listing, reading, deleting or forking of others' snapshots", async ({
    runner,
  }) => {
    const { app, admin } = runner
    const mine = await runner.sandbox()
    const theirs = await runner.sandbox()
    const theirSnap = await app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${theirs.id}/snapshots`,
      headers: admin,
      payload: {},
    })
    const theirId = (theirSnap.json() as { id: string }).id
    const own = await app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${mine.id}/snapshots`,
      headers: mine.token,
      payload: {},
    })
    expect(own.statusCode, own.body).toBe(200)
    const attempts = [
      { method: 'GET', url: '/v1/snapshots' },
      { method: 'GET', url: `/v1/snapshots/${theirId}` },
      { method: 'DELETE', url: `/v1/snapshots/${theirId}` },
      { method: 'GET', url: `/v1/sandboxes/${theirs.id}/snapshots` },
      { method: 'POST', url: `/v1/sandboxes/${theirs.id}/snapshots`, payload: {} },
      { method: 'POST', url: '/v1/sandboxes', payload: { fromSnapshot: theirId } },
    ] as const
    for (const attempt of attempts) {
      const res = await app.inject({ ...attempt, headers: mine.token })
      expect(res.statusCode, `${attempt.method} ${attempt.url}`).toBe(403)
    }
    const still = await app.inject({ method: 'GET', url: `/v1/snapshots/${theirId}`, headers: admin })
    expect(still.statusCode).toBe(200)
  })

  test('ids that are paths name no snapshot and delete nothing', async ({ runner }) => {
    const { app, admin, stateDir } = runner
    const sb = await runner.sandbox()
    await app.inject({ method: 'POST', url: `/v1/sandboxes/${sb.id}/snapshots`, headers: admin, payload: {} })
    const manifests = join(stateDir, 'snapshots', 'manifests')
    const before = readdirSync(manifests)
    for (const id of [
      '..%2F..%2Fstate.db',
      '..',
      'snap_%2E%2E%2F%2E%2E%2Fx',
      encodeURIComponent(`../manifests/${before[0]}`),
    ]) {
      for (const method of ['GET', 'DELETE'] as const) {
        const res = await app.inject({ method, url: `/v1/snapshots/${id}`, headers: admin })
        expect(res.statusCode, `${method} ${id}`).toBe(404)
        // `..` segments may not even reach the route (NOT_FOUND); no id reaches a file.
        expect(['SNAPSHOT_NOT_FOUND', 'NOT_FOUND']).toContain(
          (res.json() as { error: { code: string } }).error.code,
        )
      }
    }
    expect(readdirSync(manifests)).toEqual(before)
  })

  test('one sandbox cannot fill the store: its snapshots are capped, with a message that says what to do', async ({
    runner,
  }) => {
    const { app } = runner
    const sb = await runner.sandbox()
    for (let i = 0; i < 2; i++) {
      const ok = await app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${sb.id}/snapshots`,
        headers: sb.token,
        payload: {},
      })
      expect(ok.statusCode).toBe(200)
    }
    const refused = await app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${sb.id}/snapshots`,
      headers: sb.token,
      payload: {},
    })
    expect(refused.statusCode).toBe(429)
    const error = (refused.json() as { error: { code: string; message: string } }).error
    expect(error.code).toBe('TOO_MANY_SNAPSHOTS')
    expect(error.message).toContain('delete one of them first')
  })

  test("the API never returns a snapshot's environment", async ({ runner }) => {
    const { app, admin } = runner
    const sb = await runner.sandbox({ SECRET_TOKEN: 'hunter2-do-not-leak' })
    await app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${sb.id}/exec`,
      headers: admin,
      payload: { command: 'export ALSO_SECRET=hunter3-do-not-leak; sleep 30 &', sessionId: 'default' },
    })
    const taken = await app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${sb.id}/snapshots`,
      headers: admin,
      payload: {},
    })
    const bodies = [
      taken.body,
      (await app.inject({ method: 'GET', url: '/v1/snapshots', headers: admin })).body,
      (await app.inject({ method: 'GET', url: `/v1/sandboxes/${sb.id}/snapshots`, headers: sb.token })).body,
    ]
    for (const body of bodies) expect(body).not.toMatch(/hunter[23]/)
  })
})

describe('hibernation across a runner restart', () => {
  test('a hibernated sandbox stays hibernated through a restart and wakes on the next run with its shell state', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-hibernate-'))
    const apiKey = generateApiKey()
    const admin = { authorization: `Bearer ${apiKey}` }
    const start = async (): Promise<{ app: RunnerApp; store: StateStore }> => {
      const store = StateStore.open(stateDir)
      const app = buildApp({
        store,
        apiKeyHashes: [hashSecret(apiKey)],
        drivers: [new LocalDriver({ stateDir })],
        snapshotStore: new SnapshotStore(stateDir),
      })
      await app.ready()
      return { app, store }
    }
    let runner = await start()
    let id = ''
    try {
      const created = await runner.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        headers: admin,
        payload: {},
      })
      id = (created.json() as { id: string }).id
      const exec = (command: string) =>
        runner.app.inject({
          method: 'POST',
          url: `/v1/sandboxes/${id}/exec`,
          headers: admin,
          payload: { command, sessionId: 'default' },
        })
      await exec('mkdir -p sub && cd sub && echo kept > file && export SLEPT=yes')
      const slept = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/hibernate`,
        headers: admin,
      })
      expect(slept.statusCode, slept.body).toBe(200)
      expect((slept.json() as { status: string }).status).toBe('hibernated')
      await runner.app.close()
      runner.store.close()

      runner = await start()
      const listed = await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: admin })
      expect((listed.json() as { status: string }).status).toBe('hibernated')
      const woken = await exec('echo "$SLEPT"; basename "$PWD"; cat file')
      expect(woken.statusCode, woken.body).toBe(200)
      expect((woken.json() as { stdout: string }).stdout).toBe('yes\nsub\nkept\n')
      const after = await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: admin })
      expect((after.json() as { status: string; restoredFrom?: unknown }).status).toBe('running')
    } finally {
      if (id) await runner.app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers: admin })
      await runner.app.close()
      runner.store.close()
      rmSync(stateDir, { recursive: true, force: true })
    }
  })
})
