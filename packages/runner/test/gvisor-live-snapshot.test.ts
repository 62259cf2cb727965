// Live snapshots under the gVisor driver, with the real runner, runsc and agent: a snapshot is
// a `runsc checkpoint` of the whole sandbox, and a fork or wake restores it, so shells keep their
// running commands and background jobs and their output offsets go on. These tests fail (never
// skip) when the host cannot run gVisor sandboxes: runsc comes from apt; the runner must be root.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SandboxInfo, SessionInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import { GVISOR_LIVE_TIMEOUT_MS, gvisorRunner } from './gvisor-runner.ts'
import { exec } from './namespace-runner.ts'
import { createSandbox, shellUrl, type TestRunner } from './runner-fixture.ts'
import { ShellClient } from './shell-client.ts'

async function snapshot(runner: TestRunner, id: string): Promise<string> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/snapshots`,
    headers: runner.auth,
    payload: {},
  })
  expect(res.statusCode, res.body).toBe(200)
  return z.object({ id: z.string() }).parse(res.json()).id
}

async function fork(runner: TestRunner, snapshotId: string): Promise<SandboxInfo> {
  const res = await runner.app.inject({
    method: 'POST',
    url: '/v1/sandboxes',
    headers: runner.auth,
    payload: { fromSnapshot: snapshotId },
  })
  expect(res.statusCode, res.body).toBe(200)
  return SandboxInfo.parse(res.json())
}

async function session(runner: TestRunner, id: string): Promise<SessionInfo> {
  const res = await runner.app.inject({
    method: 'GET',
    url: `/v1/sandboxes/${id}/sessions/default`,
    headers: runner.auth,
  })
  expect(res.statusCode, res.body).toBe(200)
  return SessionInfo.parse(res.json())
}

async function count(runner: TestRunner, id: string): Promise<number> {
  return Number((await exec(runner, id, 'cat /tmp/count', 'default')).stdout.trim())
}

/** Starts, in the default session, a counting loop and a `sleep` as background jobs. */
async function startJobs(runner: TestRunner, id: string): Promise<void> {
  await exec(
    runner,
    id,
    '(i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done) & sleep 600 & echo started',
    'default',
  )
  await vi.waitFor(async () => expect(await count(runner, id)).toBeGreaterThanOrEqual(3), {
    timeout: 30_000,
    interval: 200,
  })
}

/** The manifest of a stored snapshot, as the runner wrote it. */
function manifest(
  runner: TestRunner,
  snapshotId: string,
): {
  live?: { files: { name: string; chunks: string[] }[] }
} {
  return JSON.parse(
    readFileSync(join(runner.stateDir, 'snapshots', 'manifests', `${snapshotId}.json`), 'utf8'),
  )
}

describe('gvisor live snapshots', () => {
  it(
    'a fork keeps the running counter, the background jobs, the shell process and its output offsets; the original goes on',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true })
      const id = await createSandbox(runner)
      await startJobs(runner, id)
      const before = await session(runner, id)
      const countBefore = await count(runner, id)
      const snap = await snapshot(runner, id)
      expect(manifest(runner, snap).live?.files.length).toBeGreaterThan(0)

      // The original was restored in place: same shell, its jobs still running.
      expect((await session(runner, id)).pid).toBe(before.pid)
      const still = await exec(runner, id, 'jobs -r', 'default')
      expect(still.stdout).toMatch(/sleep 600/)
      expect(still.stdout).toMatch(/while :/)

      const child = await fork(runner, snap)
      expect(child.id).not.toBe(id)
      expect(child.restoredFrom).toMatchObject({ snapshotId: snap, processesRestarted: 0 })
      const after = await session(runner, child.id)
      // The same bash process, not a new shell with its state put back.
      expect(after.pid).toBe(before.pid)
      expect(after.offset).toBeGreaterThanOrEqual(before.offset)
      const jobs = await exec(runner, child.id, 'jobs -r', 'default')
      expect(jobs.stdout).toMatch(/sleep 600/)
      expect(jobs.stdout).toMatch(/while :/)
      // The counter went on from where it was, not from zero, and keeps counting.
      const first = await count(runner, child.id)
      expect(first).toBeGreaterThanOrEqual(countBefore)
      await vi.waitFor(async () => expect(await count(runner, child.id)).toBeGreaterThan(first), {
        timeout: 30_000,
        interval: 200,
      })
      // Output offsets continue: the next run's output lands after what was there.
      const mark = await exec(runner, child.id, 'echo after-restore', 'default')
      expect(mark.stdout).toBe('after-restore\n')
      expect((await session(runner, child.id)).offset).toBeGreaterThan(after.offset)
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )

  it(
    'two forks of one live snapshot diverge, each with its own workspace copy and link',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true })
      const id = await createSandbox(runner)
      await startJobs(runner, id)
      await exec(runner, id, 'echo base > /workspace/f; export MARK=base', 'default')
      const snap = await snapshot(runner, id)
      const a = await fork(runner, snap)
      const b = await fork(runner, snap)
      await exec(runner, a.id, 'echo a > /workspace/f; echo a > /tmp/t; export MARK=a', 'default')
      await exec(runner, b.id, 'echo b > /workspace/f; echo b > /tmp/t; export MARK=b', 'default')
      expect((await exec(runner, a.id, 'cat /workspace/f /tmp/t; echo $MARK', 'default')).stdout).toBe(
        'a\na\na\n',
      )
      expect((await exec(runner, b.id, 'cat /workspace/f /tmp/t; echo $MARK', 'default')).stdout).toBe(
        'b\nb\nb\n',
      )
      expect((await exec(runner, id, 'cat /workspace/f; echo $MARK', 'default')).stdout).toBe('base\nbase\n')
      const secrets = [id, a.id, b.id].map(
        (s) => (runner.app.conch.manager.get(s).record.driverState as { linkSecret: string }).linkSecret,
      )
      expect(new Set(secrets).size).toBe(3)
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )

  it(
    'attacks: a tampered checkpoint image is refused, the image is out of every sandbox’s reach, another sandbox’s token cannot fork it',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true })
      const id = await createSandbox(runner)
      const snap = await snapshot(runner, id)

      // From inside: the snapshot store and its images are nowhere in the sandbox.
      const probe = await exec(
        runner,
        id,
        `ls ${runner.stateDir}/snapshots 2>&1; find / -xdev -name 'checkpoint.img' 2>/dev/null; find / -name '*.zst' -path '*objects*' 2>/dev/null | head -3; true`,
      )
      expect(probe.stdout).not.toMatch(/manifests|objects|checkpoint\.img|\.zst/)

      // A token of another sandbox cannot fork it.
      const other = await createSandbox(runner)
      const minted = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${other}/tokens`,
        headers: runner.auth,
        payload: {},
      })
      const token = { authorization: `Bearer ${z.object({ token: z.string() }).parse(minted.json()).token}` }
      const stolen = await runner.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        headers: token,
        payload: { fromSnapshot: snap },
      })
      expect(stolen.statusCode).toBe(403)

      // Tamper with a chunk of the image in the store: the fork is refused, not restored.
      const hash = manifest(runner, snap).live?.files[0]?.chunks[0]
      expect(hash).toMatch(/^[0-9a-f]{64}$/)
      // The chunk sits in a pack: flip the last byte of its span, found through the pack's index.
      const packs = join(runner.stateDir, 'snapshots', 'objects', 'packs')
      const spans = readdirSync(packs)
        .filter((name) => name.endsWith('.idx'))
        .flatMap((idx) =>
          (JSON.parse(readFileSync(join(packs, idx), 'utf8')).entries as [string, number, number][])
            .filter(([h]) => h === hash)
            .map(([, offset, length]) => ({
              path: join(packs, idx.replace(/\.idx$/, '.pack')),
              end: offset + length,
            })),
        )
      expect(spans).toHaveLength(1)
      const { path, end } = spans[0]!
      const bytes = readFileSync(path)
      bytes[end - 1] = (bytes[end - 1] ?? 0) ^ 0xff
      writeFileSync(path, bytes)
      const before = runner.app.conch.manager.list().length
      const res = await runner.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        headers: runner.auth,
        payload: { fromSnapshot: snap },
      })
      expect(res.statusCode).toBeGreaterThanOrEqual(400)
      expect(res.json()).toMatchObject({ error: { code: 'SNAPSHOT_INCOMPATIBLE' } })
      expect(runner.app.conch.manager.list().length).toBe(before)
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )

  it(
    'a hibernated sandbox wakes from its checkpoint: the same shell, its jobs still running',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true })
      const id = await createSandbox(runner)
      await startJobs(runner, id)
      const before = await session(runner, id)
      const countBefore = await count(runner, id)
      const res = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/hibernate`,
        headers: runner.auth,
        payload: {},
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(SandboxInfo.parse(res.json()).status).toBe('hibernated')
      // The next request wakes it.
      expect(await count(runner, id)).toBeGreaterThanOrEqual(countBefore)
      expect((await session(runner, id)).pid).toBe(before.pid)
      expect((await exec(runner, id, 'jobs -r', 'default')).stdout).toMatch(/sleep 600/)
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )

  it(
    'a client reattaching to a fork with its last offset gets the running command’s output from there: no OUTPUT_LOST, no byte twice',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true, listen: true })
      const id = await createSandbox(runner)
      const a = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
      const ready = await a.nextOf('shell_ready')
      await a.nextOf('scrollback_end')
      a.send({
        type: 'shell_run',
        id: 'tick',
        // Five ticks, then it waits for a file only the fork gets, so the command is still
        // running when the client reattaches however long the snapshot and fork take.
        command:
          'for i in $(seq 1 5); do echo tick$i; sleep 0.2; done; until [ -e /tmp/go ]; do sleep 0.1; done; for i in $(seq 6 40); do echo tick$i; done',
      })
      await a.nextOf('shell_out', 'tick')
      const snap = await snapshot(runner, id)
      // What client a saw up to the snapshot, and the offset after it.
      const seen = a.frames.filter((f) => f.type === 'shell_out' && f.id === 'tick')
      const last = seen[seen.length - 1]!
      const offset = Number(last.offset) + Buffer.byteLength(String(last.data))
      const before = seen.map((f) => String(f.data)).join('')
      await a[Symbol.asyncDispose]()

      const child = await fork(runner, snap)
      await using b = await ShellClient.open(
        shellUrl(runner, child.id, `?sessionId=${ready.sessionId}&offset=${offset}`),
        runner.apiKey,
      )
      expect(await b.nextOf('shell_ready')).toMatchObject({ sessionId: ready.sessionId, running: 'tick' })
      await exec(runner, child.id, 'touch /tmp/go')
      expect(await b.nextOf('shell_exit', 'tick')).toMatchObject({ code: 0 })
      expect(b.frames.some((f) => f.type === 'error')).toBe(false)
      const after = b.frames.filter((f) => f.type === 'shell_out' && f.id === 'tick')
      expect(Number(after[0]?.offset)).toBe(offset)
      const all = before + after.map((f) => String(f.data)).join('')
      expect(all).toBe(Array.from({ length: 40 }, (_, i) => `tick${i + 1}\n`).join(''))
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )
})
