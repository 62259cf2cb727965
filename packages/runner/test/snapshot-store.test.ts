import { spawnSync } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import {
  chmodSync,
  closeSync,
  ftruncateSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test as base, describe, expect } from 'vitest'
import { RunnerError } from '../src/runner-error.ts'
import type { SnapshotManifest } from '../src/snapshots/snapshot-manifest.ts'
import {
  DEFAULT_SNAPSHOT_LIMITS,
  type SnapshotLimits,
  SnapshotStore,
} from '../src/snapshots/snapshot-store.ts'

interface Dirs {
  state: string
  workspace: string
  scratch: string
  target: (name: string) => string
}

const test = base.extend<{ dirs: Dirs }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take a destructuring pattern
  dirs: async ({}, use) => {
    const top = mkdtempSync(join(tmpdir(), 'conch-snapshots-'))
    const dirs: Dirs = {
      state: join(top, 'state'),
      workspace: join(top, 'workspace'),
      scratch: join(top, 'scratch'),
      target: (name) => {
        const dir = join(top, 'targets', name)
        mkdirSync(dir, { recursive: true })
        return dir
      },
    }
    for (const dir of [dirs.state, dirs.workspace, dirs.scratch]) mkdirSync(dir, { recursive: true })
    await use(dirs)
    rmSync(top, { recursive: true, force: true })
  },
})

const CONFIG = { driver: 'local', limits: {}, env: {}, metadata: {}, idleTimeoutMs: null }
const SHELLS = { sessions: [], processes: [] }

function store(dirs: Dirs, limits: Partial<SnapshotLimits> = {}): SnapshotStore {
  return new SnapshotStore(dirs.state, { ...DEFAULT_SNAPSHOT_LIMITS, ...limits })
}

function take(s: SnapshotStore, dirs: Dirs): Promise<SnapshotManifest> {
  return s.take({
    sandboxId: 'sb_test0001',
    name: null,
    sandbox: CONFIG,
    shells: SHELLS,
    workspace: dirs.workspace,
  })
}

/** Every entry under `root`: type, mode, and content hash, link target or nothing; names as bytes (hex). */
function listing(root: string): string[] {
  const out: string[] = []
  const walk = (dir: Buffer, rel: string): void => {
    for (const name of readdirSync(dir, { encoding: 'buffer' }).sort(Buffer.compare)) {
      const full = Buffer.concat([dir, Buffer.from('/'), name])
      const path = `${rel}/${name.toString('hex')}`
      const st = lstatSync(full)
      const mode = (st.mode & 0o7777).toString(8)
      if (st.isSymbolicLink())
        out.push(`${path} link ${readlinkSync(full, { encoding: 'buffer' }).toString('hex')}`)
      else if (st.isDirectory()) {
        out.push(`${path} dir ${mode}`)
        walk(full, path)
      } else {
        const hash = createHash('sha256').update(readFileSync(full)).digest('hex')
        out.push(`${path} file ${mode} ${st.size} ${hash} ${Math.round(st.mtimeMs)}`)
      }
    }
  }
  walk(Buffer.from(root), '')
  return out
}

function codeOf(error: unknown): string | undefined {
  return error instanceof RunnerError ? error.code : undefined
}

describe('workspace snapshots', () => {
  test('restores binary files, symlinks, empty dirs, permissions and odd names exactly', async ({ dirs }) => {
    const w = dirs.workspace
    writeFileSync(join(w, 'binary.bin'), randomBytes(300_000))
    writeFileSync(join(w, 'empty'), '')
    writeFileSync(join(w, 'script.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 })
    writeFileSync(join(w, 'secret'), 'only me', { mode: 0o600 })
    mkdirSync(join(w, 'empty-dir'))
    mkdirSync(join(w, 'locked'), { mode: 0o500 })
    mkdirSync(join(w, 'a', 'b', 'c'), { recursive: true })
    writeFileSync(join(w, 'a', 'b', 'c', 'deep.txt'), 'x'.repeat(10_000_000))
    symlinkSync('../script.sh', join(w, 'a', 'rel-link'))
    symlinkSync('/does/not/exist', join(w, 'dangling'))
    writeFileSync(join(w, 'new\nline name'), 'nl')
    writeFileSync(Buffer.concat([Buffer.from(`${w}/`), Buffer.from([0xff, 0xfe, 0x41])]), 'latin')
    const before = listing(w)
    const s = store(dirs)
    const manifest = await take(s, dirs)
    const target = dirs.target('one')
    await s.restoreWorkspace(s.get(manifest.id), target)
    expect(listing(target)).toEqual(before)
    expect(manifest.storedBytes).toBeLessThan(400_000)
  })

  test('a second snapshot after a small change stores only the change', async ({ dirs }) => {
    for (let i = 0; i < 50; i++) writeFileSync(join(dirs.workspace, `f${i}`), randomBytes(100_000))
    const s = store(dirs)
    const first = await take(s, dirs)
    writeFileSync(join(dirs.workspace, 'f7'), randomBytes(100_000))
    const second = await take(s, dirs)
    expect(first.storedBytes).toBeGreaterThanOrEqual(5_000_000)
    expect(second.storedBytes).toBeGreaterThan(0)
    expect(second.storedBytes).toBeLessThanOrEqual(100_100)
    const target = dirs.target('second')
    await s.restoreWorkspace(second, target)
    expect(listing(target)).toEqual(listing(dirs.workspace))
  })

  test('lists snapshots, and deleting one keeps the objects another still uses', async ({ dirs }) => {
    writeFileSync(join(dirs.workspace, 'shared'), randomBytes(50_000))
    const s = store(dirs)
    const first = await take(s, dirs)
    writeFileSync(join(dirs.workspace, 'later'), randomBytes(50_000))
    const second = await take(s, dirs)
    expect(s.list().map((m) => m.id)).toEqual([first.id, second.id])
    await s.delete(first.id)
    expect(s.list().map((m) => m.id)).toEqual([second.id])
    const target = dirs.target('after-delete')
    await s.restoreWorkspace(second, target)
    expect(listing(target)).toEqual(listing(dirs.workspace))
    await s.delete(second.id)
    const objects = join(dirs.state, 'snapshots', 'objects')
    expect(readdirSync(objects).flatMap((d) => readdirSync(join(objects, d)))).toEqual([])
  })

  test('refuses more snapshots than the limit, and says what to do', async ({ dirs }) => {
    const s = store(dirs, { maxSnapshots: 1 })
    await take(s, dirs)
    const error = await take(s, dirs).catch((e: unknown) => e)
    expect(codeOf(error)).toBe('TOO_MANY_SNAPSHOTS')
    expect((error as Error).message).toContain('delete snapshots')
  })
})

describe('attacks: a hostile workspace', () => {
  test('a symlink to a host file is kept as a link: the host file is neither read nor written', async ({
    dirs,
  }) => {
    const host = join(dirs.scratch, 'host-secret')
    writeFileSync(host, 'host secret')
    symlinkSync(host, join(dirs.workspace, 'steal'))
    symlinkSync(dirs.scratch, join(dirs.workspace, 'host-dir'))
    const s = store(dirs)
    const manifest = await take(s, dirs)
    expect(manifest.workspace.entries.map((e) => e.type)).toEqual(['symlink', 'symlink'])
    expect(manifest.workspace.bytes).toBe(0)
    const target = dirs.target('links')
    await s.restoreWorkspace(manifest, target)
    expect(readlinkSync(join(target, 'steal'))).toBe(host)
    expect(readFileSync(host, 'utf8')).toBe('host secret')
  })

  test('FIFOs and device files are skipped, and a FIFO does not block the snapshot', async ({ dirs }) => {
    expect(spawnSync('mkfifo', [join(dirs.workspace, 'pipe')]).status).toBe(0)
    expect(spawnSync('mknod', [join(dirs.workspace, 'null'), 'c', '1', '3']).status).toBe(0)
    writeFileSync(join(dirs.workspace, 'real'), 'ok')
    const manifest = await take(store(dirs), dirs)
    expect(manifest.workspace.skipped).toEqual([
      { path: 'null', reason: 'device' },
      { path: 'pipe', reason: 'fifo' },
    ])
    expect(manifest.workspace.entries.map((e) => e.type)).toEqual(['file'])
  })

  test('a huge sparse file is refused by its size before it is read', async ({ dirs }) => {
    const fd = openSync(join(dirs.workspace, 'sparse'), 'w')
    ftruncateSync(fd, 64 * 1024 * 1024 * 1024)
    closeSync(fd)
    const error = await take(store(dirs), dirs).catch((e: unknown) => e)
    expect(codeOf(error)).toBe('SNAPSHOT_TOO_LARGE')
    expect((error as Error).message).toContain('sparse file counts at its full size')
    expect(readdirSync(join(dirs.state, 'snapshots', 'manifests'))).toEqual([])
  })

  test('a hardlink to a file outside is copied: the restored file is not linked to it', async ({ dirs }) => {
    const outside = join(dirs.scratch, 'outside')
    writeFileSync(outside, 'outside content')
    linkSync(outside, join(dirs.workspace, 'inner'))
    const s = store(dirs)
    const manifest = await take(s, dirs)
    const target = dirs.target('hardlink')
    await s.restoreWorkspace(manifest, target)
    writeFileSync(join(target, 'inner'), 'changed in the fork')
    expect(readFileSync(outside, 'utf8')).toBe('outside content')
    expect(lstatSync(join(target, 'inner')).nlink).toBe(1)
  })

  test('a tampered manifest cannot write through a link or outside the target', async ({ dirs }) => {
    const s = store(dirs)
    const manifest = await take(s, dirs)
    const b64 = (s: string): string => Buffer.from(s).toString('base64')
    const escaped = join(dirs.scratch, 'escaped')
    const attempts: SnapshotManifest['workspace']['entries'][] = [
      [{ type: 'dir', path: [b64('..')], mode: 0o755, mtimeMs: 0 }],
      [{ type: 'file', path: [b64('a/b')], mode: 0o644, mtimeMs: 0, size: 0, chunks: [] }],
      [
        { type: 'symlink', path: [b64('out')], mode: 0o777, mtimeMs: 0, target: b64(dirs.scratch) },
        { type: 'file', path: [b64('out'), b64('escaped')], mode: 0o644, mtimeMs: 0, size: 0, chunks: [] },
      ],
      [
        { type: 'symlink', path: [b64('same')], mode: 0o777, mtimeMs: 0, target: b64(escaped) },
        { type: 'file', path: [b64('same')], mode: 0o644, mtimeMs: 0, size: 0, chunks: [] },
      ],
    ]
    for (const [i, entries] of attempts.entries()) {
      const error = await s
        .restoreWorkspace(
          { ...manifest, workspace: { ...manifest.workspace, entries } },
          dirs.target(`t${i}`),
        )
        .catch((e: unknown) => e)
      expect(codeOf(error), `attempt ${i}`).toBe('SNAPSHOT_INCOMPATIBLE')
    }
    expect(readdirSync(dirs.scratch)).toEqual([])
  })

  test('snapshot ids that are paths find nothing, and another format version is refused with its version', async ({
    dirs,
  }) => {
    const s = store(dirs)
    for (const id of ['../../etc/passwd', 'snap_../../../../x', '']) {
      expect(
        codeOf(
          (() => {
            try {
              s.get(id)
            } catch (e) {
              return e
            }
          })(),
        ),
      ).toBe('SNAPSHOT_NOT_FOUND')
    }
    const manifest = await take(s, dirs)
    const path = join(dirs.state, 'snapshots', 'manifests', `${manifest.id}.json`)
    writeFileSync(path, JSON.stringify({ ...manifest, formatVersion: 99 }))
    const error = (() => {
      try {
        s.get(manifest.id)
      } catch (e) {
        return e
      }
    })()
    expect(codeOf(error)).toBe('SNAPSHOT_INCOMPATIBLE')
    expect((error as RunnerError).details).toEqual({ formatVersion: 99 })
  })

  test('a directory the sandbox made unreadable is still captured by the runner', async ({ dirs }) => {
    mkdirSync(join(dirs.workspace, 'closed'))
    writeFileSync(join(dirs.workspace, 'closed', 'inside'), 'data')
    chmodSync(join(dirs.workspace, 'closed'), 0)
    const s = store(dirs)
    const manifest = await take(s, dirs)
    expect(manifest.workspace.entries.map((e) => e.type)).toEqual(['dir', 'file'])
  })
})
