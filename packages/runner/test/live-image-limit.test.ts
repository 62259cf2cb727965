// A live snapshot's checkpoint image counts against `--max-snapshot-bytes` with the workspace,
// against the real snapshot store on real folders. The checkpoint folder here is files of
// random bytes, as `runsc checkpoint` leaves them (its own names): the store only reads it. The
// gVisor half (the sandbox goes on after a refused live snapshot or hibernation) is in
// gvisor-live-snapshot-limits.test.ts.
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test as base, describe, expect } from 'vitest'
import { RunnerError } from '../src/runner-error.ts'
import { ContentStore } from '../src/snapshots/content-store.ts'
import { storeLiveImage } from '../src/snapshots/live-image.ts'
import { DEFAULT_SNAPSHOT_LIMITS, SnapshotStore } from '../src/snapshots/snapshot-store.ts'
import { CHUNK_BYTES } from '../src/snapshots/workspace-capture.ts'

interface Dirs {
  state: string
  workspace: string
  image: string
}

const test = base.extend<{ dirs: Dirs }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take a destructuring pattern
  dirs: async ({}, use) => {
    const top = mkdtempSync(join(tmpdir(), 'conch-live-limit-'))
    const dirs = { state: join(top, 'state'), workspace: join(top, 'workspace'), image: join(top, 'image') }
    for (const dir of Object.values(dirs)) mkdirSync(dir, { recursive: true })
    await use(dirs)
    rmSync(top, { recursive: true, force: true })
  },
})

const CONFIG = { driver: 'gvisor', limits: {}, env: {}, metadata: {}, idleTimeoutMs: null }
const SHELLS = { sessions: [], processes: [] }

function store(dirs: Dirs, maxSnapshotBytes: number): SnapshotStore {
  return new SnapshotStore(dirs.state, { ...DEFAULT_SNAPSHOT_LIMITS, maxSnapshotBytes })
}

function take(s: SnapshotStore, dirs: Dirs) {
  return s.take({
    sandboxId: 'sb_1',
    name: null,
    sandbox: CONFIG,
    shells: SHELLS,
    workspace: dirs.workspace,
    liveImage: { dir: dirs.image, runscVersion: 'runsc version test' },
  })
}

/** Every file under the store's objects folder (chunks and temp files). */
function objects(dirs: Dirs): string[] {
  const root = join(dirs.state, 'snapshots', 'objects')
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => e.name)
}

function manifests(dirs: Dirs): string[] {
  return readdirSync(join(dirs.state, 'snapshots', 'manifests'))
}

async function refusal(promise: Promise<unknown>): Promise<RunnerError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  )
  if (!(error instanceof RunnerError)) throw new Error(`expected a RunnerError, got ${String(error)}`)
  return error
}

describe('live image size limit', () => {
  test('refuses an image over the limit on its own before storing anything', async ({ dirs }) => {
    writeFileSync(join(dirs.workspace, 'small'), randomBytes(1000))
    writeFileSync(join(dirs.image, 'checkpoint.img'), randomBytes(300_000))
    const s = store(dirs, 200_000)
    const error = await refusal(take(s, dirs))
    expect(error.code).toBe('SNAPSHOT_TOO_LARGE')
    expect(error.message).toContain('checkpoint image (300000 bytes')
    expect(error.message).toContain('--max-snapshot-bytes')
    expect(error.details).toEqual({ limit: 200_000 })
    expect(objects(dirs)).toEqual([])
    expect(manifests(dirs)).toEqual([])
  })

  test('refuses a workspace and image that pass the limit together, and sweeps the chunks it stored', async ({
    dirs,
  }) => {
    writeFileSync(join(dirs.workspace, 'data'), randomBytes(150_000))
    writeFileSync(join(dirs.image, 'checkpoint.img'), randomBytes(100_000))
    writeFileSync(join(dirs.image, 'pages.img'), randomBytes(20_000))
    const s = store(dirs, 200_000)
    const error = await refusal(take(s, dirs))
    expect(error.code).toBe('SNAPSHOT_TOO_LARGE')
    expect(error.message).toContain('(120000 bytes')
    expect(error.message).toContain('(150000 bytes of files)')
    expect(objects(dirs)).toEqual([])
    expect(manifests(dirs)).toEqual([])
    expect(s.list()).toEqual([])
  })

  test('keeps a snapshot whose workspace and image fit, counting the image in storedBytes', async ({
    dirs,
  }) => {
    writeFileSync(join(dirs.workspace, 'data'), randomBytes(50_000))
    writeFileSync(join(dirs.image, 'checkpoint.img'), randomBytes(100_000))
    const manifest = await take(store(dirs, 200_000), dirs)
    expect(manifest.live?.files.map((f) => f.size)).toEqual([100_000])
    // Random bytes do not compress: both are stored as they are.
    expect(manifest.storedBytes).toBe(150_000)
  })

  test('keeps an earlier snapshot whole when a later one is refused', async ({ dirs }) => {
    writeFileSync(join(dirs.workspace, 'data'), randomBytes(50_000))
    writeFileSync(join(dirs.image, 'checkpoint.img'), randomBytes(100_000))
    const s = store(dirs, 200_000)
    const kept = await take(s, dirs)
    const before = objects(dirs).sort()
    writeFileSync(join(dirs.image, 'more.img'), randomBytes(60_000))
    expect((await refusal(take(s, dirs))).code).toBe('SNAPSHOT_TOO_LARGE')
    expect(objects(dirs).sort()).toEqual(before)
    expect(s.list().map((m) => m.id)).toEqual([kept.id])
  })

  test('stops storing an image that reads longer than its budget (one that grew after it was measured)', async ({
    dirs,
  }) => {
    writeFileSync(join(dirs.image, 'checkpoint.img'), randomBytes(CHUNK_BYTES + 10))
    const objectsDir = join(dirs.state, 'objects')
    const error = await refusal(
      storeLiveImage(dirs.image, new ContentStore(objectsDir), 'v', {
        maxBytes: CHUNK_BYTES + 9,
        workspaceBytes: 0,
        limit: CHUNK_BYTES + 9,
      }),
    )
    expect(error.code).toBe('SNAPSHOT_TOO_LARGE')
  })
})
