// The content store's packs, attacked as a sandbox would if it could reach the store's files:
// every malformed index is refused whole with a typed error, nothing outside the store is read,
// and a store of loose objects (format 1) still reads.
import { createHash, randomBytes } from 'node:crypto'
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { zstdCompressSync } from 'node:zlib'
import { test as base, describe, expect } from 'vitest'
import { RunnerError } from '../src/runner-error.ts'
import { ContentStore } from '../src/snapshots/content-store.ts'
import type { PackIndexFile } from '../src/snapshots/object-pack.ts'

const test = base.extend<{ dir: string }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take a destructuring pattern
  dir: async ({}, use) => {
    const top = mkdtempSync(join(tmpdir(), 'conch-packs-'))
    await use(join(top, 'objects'))
    rmSync(top, { recursive: true, force: true })
  },
})

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex')

/** Text-like content (compresses) and random content (kept raw). */
function contents(n: number, tag = 'file'): Buffer[] {
  return Array.from({ length: n }, (_, i) =>
    i % 2 ? randomBytes(300_000) : Buffer.from(`${tag} ${i} `.repeat(2000 + i)),
  )
}

async function fill(dir: string, items: Buffer[]): Promise<ContentStore> {
  const store = new ContentStore(dir)
  await Promise.all(items.map((c) => store.put(c)))
  store.seal()
  return store
}

function packFiles(dir: string): string[] {
  return readdirSync(join(dir, 'packs')).sort()
}

function onlyIndex(dir: string): { path: string; file: PackIndexFile; pack: string } {
  const idx = packFiles(dir).find((n) => n.endsWith('.idx'))!
  const path = join(dir, 'packs', idx)
  return { path, file: JSON.parse(readFileSync(path, 'utf8')), pack: path.replace(/\.idx$/, '.pack') }
}

async function codeOfRead(store: ContentStore, hash: string): Promise<string | undefined> {
  try {
    await store.read(hash)
    return 'read'
  } catch (error) {
    return error instanceof RunnerError ? error.code : `untyped: ${String(error)}`
  }
}

describe('content store packs', () => {
  test('a snapshot of many objects makes one pack and one index, read back and deduplicated by a new store', async ({
    dir,
  }) => {
    const items = contents(40)
    const first = await fill(dir, [...items, ...items])
    expect(packFiles(dir)).toHaveLength(2)
    const again = new ContentStore(dir)
    for (const c of items) expect((await again.read(sha(c))).equals(c)).toBe(true)
    for (const c of items) expect((await again.put(c)).addedBytes).toBe(0)
    again.seal()
    expect(packFiles(dir)).toHaveLength(2)
    expect(first.encodingOf(sha(items[0]!))).toBe('zstd')
    expect(first.encodingOf(sha(items[1]!))).toBe('raw')
  })

  test('a store of loose objects written by format 1 still reads, dedups and sweeps', async ({ dir }) => {
    const text = Buffer.from('loose text '.repeat(500))
    const noise = randomBytes(70_000)
    for (const [content, ext, bytes] of [
      [text, 'zst', zstdCompressSync(text)],
      [noise, 'raw', noise],
    ] as const) {
      mkdirSync(join(dir, sha(content).slice(0, 2)), { recursive: true })
      writeFileSync(join(dir, sha(content).slice(0, 2), `${sha(content)}.${ext}`), bytes)
    }
    const store = new ContentStore(dir)
    expect((await store.read(sha(text))).equals(text)).toBe(true)
    expect((await store.read(sha(noise))).equals(noise)).toBe(true)
    expect(store.rawPath(sha(noise))).toMatch(/\.raw$/)
    expect((await store.put(text)).addedBytes).toBe(0)
    store.seal()
    expect(packFiles(dir)).toEqual([])
    store.sweep(new Set([sha(noise)]))
    expect(store.encodingOf(sha(text))).toBeNull()
    expect((await store.read(sha(noise))).equals(noise)).toBe(true)
  })

  test('the sweep deletes a pack nothing uses and keeps a pack partly used whole', async ({ dir }) => {
    const a = contents(4)
    const b = contents(4, 'other')
    const store = await fill(dir, a)
    await Promise.all(b.map((c) => store.put(c)))
    store.seal()
    expect(packFiles(dir)).toHaveLength(4)
    const freed = store.sweep(new Set([sha(a[0]!)]))
    expect(freed).toBeGreaterThan(0)
    expect(packFiles(dir)).toHaveLength(2)
    for (const c of a) expect((await store.read(sha(c))).equals(c)).toBe(true)
    expect(store.encodingOf(sha(b[0]!))).toBeNull()
    store.sweep(new Set())
    expect(packFiles(dir)).toEqual([])
  })

  test('a pack without its index (a capture that never finished) is not read and is swept', async ({
    dir,
  }) => {
    const items = contents(2)
    const store = new ContentStore(dir)
    for (const c of items) await store.put(c)
    // No seal: the process "crashed" here.
    const reopened = new ContentStore(dir)
    expect(reopened.encodingOf(sha(items[0]!))).toBeNull()
    reopened.sweep(new Set(items.map(sha)))
    expect(packFiles(dir)).toEqual([])
  })

  test('a tampered pack byte fails the read as SNAPSHOT_INCOMPATIBLE', async ({ dir }) => {
    const items = contents(2)
    await fill(dir, items)
    const { pack, file } = onlyIndex(dir)
    const bytes = readFileSync(pack)
    for (const [, offset, length] of file.entries)
      bytes[offset + length - 1] = (bytes[offset + length - 1] ?? 0) ^ 0x01
    writeFileSync(pack, bytes)
    const store = new ContentStore(dir)
    for (const c of items) expect(await codeOfRead(store, sha(c))).toBe('SNAPSHOT_INCOMPATIBLE')
  })

  const attacks: [string, (file: PackIndexFile, packPath: string) => void][] = [
    [
      'an entry past the end of the pack',
      (f) => {
        f.entries[0]![2] += 1_000_000_000
      },
    ],
    [
      'two overlapping entries',
      (f) => {
        f.entries[1]![1] = f.entries[0]![1] + 1
      },
    ],
    ['a pack truncated mid-object', (f, p) => truncateSync(p, f.entries.at(-1)![1] + 10)],
    [
      'two entries for one hash with different bytes',
      (f) => void f.entries.push([f.entries[0]![0], f.entries[1]![1], f.entries[1]![2], f.entries[1]![3]]),
    ],
    [
      'a negative offset',
      (f) => {
        f.entries[0]![1] = -5
      },
    ],
    [
      'an unknown version',
      (f) => {
        f.version = 99
      },
    ],
  ]
  for (const [name, tamper] of attacks) {
    test(`an index with ${name} is refused whole, typed`, async ({ dir }) => {
      const items = contents(4)
      await fill(dir, items)
      const { path, file, pack } = onlyIndex(dir)
      tamper(file, pack)
      writeFileSync(path, JSON.stringify(file))
      const store = new ContentStore(dir)
      for (const c of items) expect(await codeOfRead(store, sha(c))).toBe('SNAPSHOT_INCOMPATIBLE')
    })
  }

  test('a pack or index that is a symlink, or a name that is a path, reads nothing outside the store', async ({
    dir,
  }) => {
    const items = contents(2)
    await fill(dir, items)
    const { path, file, pack } = onlyIndex(dir)
    const outside = join(dir, '..', 'outside.bin')
    writeFileSync(outside, readFileSync(pack))
    rmSync(pack)
    symlinkSync(outside, pack)
    const viaLink = new ContentStore(dir)
    for (const c of items) expect(await codeOfRead(viaLink, sha(c))).toBe('SNAPSHOT_INCOMPATIBLE')
    // An index may not name another pack: the pack is the index's own name, never a field.
    writeFileSync(path, JSON.stringify({ ...file, pack: '../outside.bin' }))
    writeFileSync(join(dir, 'packs', 'pack-..%2Foutside.idx'), JSON.stringify(file))
    const named = new ContentStore(dir)
    for (const c of items) expect(await codeOfRead(named, sha(c))).toBe('SNAPSHOT_INCOMPATIBLE')
    named.sweep(new Set(items.map(sha)))
    expect(readFileSync(outside).length).toBeGreaterThan(0)
    expect(packFiles(dir)).toEqual([])
  })
})
