// A live snapshot's checkpoint image counts against `--max-snapshot-bytes`, with the real
// runner, runsc and agent: a snapshot or hibernation whose image does not fit is refused with
// SNAPSHOT_TOO_LARGE, keeps nothing, and the sandbox goes on from its image as it was (same
// shell, jobs running). These tests fail (never skip) when the host cannot run gVisor sandboxes.
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { SessionInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { GVISOR_LIVE_TIMEOUT_MS, gvisorRunner } from './gvisor-runner.ts'
import { exec } from './namespace-runner.ts'
import { createSandbox, type TestRunner } from './runner-fixture.ts'

/** Smaller than any image of a sandbox running the agent (its node process alone is larger). */
const SMALL_CAP = 1_000_000

async function pid(runner: TestRunner, id: string): Promise<number | null> {
  const res = await runner.app.inject({
    method: 'GET',
    url: `/v1/sandboxes/${id}/sessions/default`,
    headers: runner.auth,
  })
  expect(res.statusCode, res.body).toBe(200)
  return SessionInfo.parse(res.json()).pid
}

/** Every file in the snapshot store's objects folder, temp files included. */
function objects(runner: TestRunner): string[] {
  return readdirSync(join(runner.stateDir, 'snapshots', 'objects'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => e.name)
}

function manifests(runner: TestRunner): string[] {
  return readdirSync(join(runner.stateDir, 'snapshots', 'manifests'))
}

async function startJob(runner: TestRunner, id: string): Promise<void> {
  await exec(runner, id, 'sleep 600 & echo started', 'default')
  await vi.waitFor(
    async () => expect((await exec(runner, id, 'jobs -r', 'default')).stdout).toMatch(/sleep 600/),
    {
      timeout: 30_000,
      interval: 200,
    },
  )
}

describe('gvisor live snapshot size limit', () => {
  it(
    'refuses a live snapshot whose image passes the limit, keeps no chunk, and the sandbox goes on',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true, limits: { maxSnapshotBytes: SMALL_CAP } })
      const id = await createSandbox(runner)
      await exec(runner, id, 'echo small > /workspace/f', 'default')
      await startJob(runner, id)
      const before = await pid(runner, id)
      const res = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/snapshots`,
        headers: runner.auth,
        payload: {},
      })
      expect(res.statusCode, res.body).toBe(413)
      const body = res.json() as { error: { code: string; message: string } }
      expect(body.error.code).toBe('SNAPSHOT_TOO_LARGE')
      expect(body.error.message).toContain('checkpoint image')
      expect(body.error.message).toContain('--max-snapshot-bytes')
      expect(manifests(runner)).toEqual([])
      expect(objects(runner)).toEqual([])
      // Restored in place from its image: the same shell, its job still running.
      expect(await pid(runner, id)).toBe(before)
      expect((await exec(runner, id, 'jobs -r; cat /workspace/f', 'default')).stdout).toMatch(
        /sleep 600[\s\S]*small/,
      )
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )

  it(
    'refuses a live hibernation whose image passes the limit, and the sandbox stays awake with its processes',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true, limits: { maxSnapshotBytes: SMALL_CAP } })
      const id = await createSandbox(runner)
      await startJob(runner, id)
      const before = await pid(runner, id)
      const res = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/hibernate`,
        headers: runner.auth,
        payload: {},
      })
      expect(res.statusCode, res.body).toBe(413)
      expect((res.json() as { error: { code: string } }).error.code).toBe('SNAPSHOT_TOO_LARGE')
      expect(runner.app.conch.manager.get(id).record.status).toBe('running')
      expect(manifests(runner)).toEqual([])
      expect(objects(runner)).toEqual([])
      expect(await pid(runner, id)).toBe(before)
      expect((await exec(runner, id, 'jobs -r', 'default')).stdout).toMatch(/sleep 600/)
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )
})
