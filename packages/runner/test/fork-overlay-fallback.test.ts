// Where a fork cannot mount an overlay it copies its workspace, says why in the log, and leaves
// no overlay trace that its next snapshot could mistake for one: turned off, a failed mount,
// and a real rootless runner (not root: no overlay mount at all).
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import type { RunnerError } from '../src/runner-error.ts'
import { SandboxSnapshots } from '../src/sandbox-snapshots.ts'
import { SnapshotStore } from '../src/snapshots/snapshot-store.ts'
import { isMountPoint, overlayDirOf, workspaceOverlay } from '../src/snapshots/workspace-overlay.ts'
import { rootlessRunner } from './rootless-runner.ts'

const CONFIG = { driver: 'local', limits: {}, env: {}, metadata: {}, idleTimeoutMs: null }

async function setup() {
  const top = mkdtempSync(join(tmpdir(), 'conch-fork-fallback-'))
  const source = join(top, 'source')
  mkdirSync(join(source, 'sub'), { recursive: true })
  writeFileSync(join(source, 'sub', 'f'), 'from the snapshot')
  writeFileSync(join(source, 'big'), randomBytes(300_000))
  const store = new SnapshotStore(join(top, 'state'))
  const manifest = await store.take({
    sandboxId: 'sb_source',
    name: null,
    sandbox: CONFIG,
    shells: { sessions: [], processes: [] },
    workspace: source,
  })
  const driver = new LocalDriver({ stateDir: join(top, 'state') })
  const logs: string[] = []
  const logger = {
    info: (details: object, message: string) => logs.push(`${message} ${JSON.stringify(details)}`),
  }
  const fork = (n: number) =>
    driver.create({
      id: `sb_fork${n}`,
      env: {},
      limits: {},
      scrollbackBytes: 1024,
      maxSessions: 4,
      linkSecret: '0'.repeat(64),
    })
  return {
    top,
    store,
    manifest,
    driver,
    logs,
    logger,
    fork,
    [Symbol.dispose]: () => rmSync(top, { recursive: true, force: true }),
  }
}

describe('forks that cannot mount an overlay copy', () => {
  it('turned off: the workspace is copied, the log says why, nothing is mounted', async () => {
    using s = await setup()
    const snapshots = new SandboxSnapshots(s.store, s.logger, 'off')
    const handle = await s.fork(1)
    expect(await snapshots.restoreWorkspace(s.manifest, s.driver, handle)).toBe('copy')
    expect(readFileSync(join(handle.workdir, 'sub', 'f'), 'utf8')).toBe('from the snapshot')
    expect(isMountPoint(handle.workdir)).toBe(false)
    expect(workspaceOverlay(handle.workdir)).toBeNull()
    expect(s.logs.join('\n')).toMatch(/forks copy their workspace: no overlay here .*turned off/)
    await s.driver.destroy(handle)
  })

  it('a failed mount: copied, logged, and no lease or tree user is left behind', async () => {
    using s = await setup()
    const snapshots = new SandboxSnapshots(s.store, s.logger)
    const handle = await s.fork(2)
    // Something already sits where the overlay folder would go.
    writeFileSync(overlayDirOf(handle.workdir), 'in the way')
    expect(await snapshots.restoreWorkspace(s.manifest, s.driver, handle)).toBe('copy')
    expect(readFileSync(join(handle.workdir, 'sub', 'f'), 'utf8')).toBe('from the snapshot')
    expect(isMountPoint(handle.workdir)).toBe(false)
    expect(workspaceOverlay(handle.workdir)).toBeNull()
    expect(existsSync(overlayDirOf(handle.workdir))).toBe(false)
    expect(s.store.lowers.users(s.manifest.id)).toBe(0)
    expect(s.logs.join('\n')).toMatch(/the overlay mount failed .*EEXIST/)
    // A fork that mounts, beside it, is counted until its driver destroys it.
    const other = await s.fork(3)
    expect(await snapshots.restoreWorkspace(s.manifest, s.driver, other)).toBe('overlay')
    expect(isMountPoint(other.workdir)).toBe(true)
    expect(s.store.lowers.users(s.manifest.id)).toBe(1)
    await s.driver.destroy(other)
    expect(isMountPoint(other.workdir)).toBe(false)
    expect(s.store.lowers.users(s.manifest.id)).toBe(0)
    await s.driver.destroy(handle)
  })

  it('copying a workspace larger than the fork disk is SNAPSHOT_TOO_LARGE, as before overlays', async () => {
    using s = await setup()
    writeFileSync(join(s.top, 'source', 'huge'), Buffer.alloc(100_000_000, 7))
    const manifest = await s.store.take({
      sandboxId: 'sb_source',
      name: null,
      sandbox: CONFIG,
      shells: { sessions: [], processes: [] },
      workspace: join(s.top, 'source'),
    })
    const driver = new NamespaceDriver({ stateDir: join(s.top, 'state') })
    const handle = await driver.create({
      id: 'sb_small',
      env: {},
      limits: { diskBytes: 64 * 1024 * 1024 },
      scrollbackBytes: 1024,
      maxSessions: 4,
      linkSecret: '0'.repeat(64),
    })
    try {
      const snapshots = new SandboxSnapshots(s.store, s.logger, 'off')
      const error = await snapshots.restoreWorkspace(manifest, driver, handle).catch((e: unknown) => e)
      expect((error as RunnerError).code).toBe('SNAPSHOT_TOO_LARGE')
    } finally {
      await driver.destroy(handle)
    }
  })

  it('a rootless runner forks by copying, logs why, and its forks still diverge', async () => {
    await using runner = await rootlessRunner()
    const source = await runner.create()
    await runner.exec(source.id, 'mkdir d && echo base > d/f')
    const snap = await runner.request('POST', `/v1/sandboxes/${source.id}/snapshots`, {})
    expect(snap.status).toBe(200)
    const snapshotId = (snap.body as { id: string }).id
    const a = await runner.create({ fromSnapshot: snapshotId })
    const b = await runner.create({ fromSnapshot: snapshotId })
    await runner.exec(a.id, 'echo a > d/f')
    expect((await runner.exec(b.id, 'cat d/f')).stdout).toBe('base\n')
    expect((await runner.exec(a.id, 'cat d/f; grep -c " overlay " /proc/self/mountinfo')).stdout).toBe(
      'a\n0\n',
    )
    expect(runner.err()).toMatch(
      /"reason":"[^"]*not root[^"]*".*"msg":"forks copy their workspace: no overlay here"/,
    )
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(runner.stateDir)
  })
})
