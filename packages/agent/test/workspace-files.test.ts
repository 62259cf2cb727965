import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { WorkspaceFiles } from '../src/workspace-files.ts'
import { WorkspacePaths } from '../src/workspace-paths.ts'

let base: string
let root: string
let files: WorkspaceFiles

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'conch-files-')))
  root = join(base, 'workspace')
  rmSync(root, { recursive: true, force: true })
  mkdirSync(root)
  writeFileSync(join(base, 'secret.txt'), 'host secret')
  files = new WorkspaceFiles(new WorkspacePaths(root))
})
afterEach(() => rmSync(base, { recursive: true, force: true }))

const chunks = (...parts: (string | Uint8Array)[]) =>
  Readable.from(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)))
const readAll = async (path: string) => {
  const { stream } = await files.read(path)
  const out: Buffer[] = []
  for await (const c of stream) out.push(c as Buffer)
  return Buffer.concat(out)
}

describe('workspace files', () => {
  it('writes and reads text and binary files losslessly', async () => {
    await files.write('/workspace/a.txt', chunks('hé', 'llo'))
    expect((await readAll('/workspace/a.txt')).toString()).toBe('héllo')
    const binary = new Uint8Array([0, 255, 254, 10, 13, 0])
    await files.write('bin/b.dat', chunks(binary))
    expect([...(await readAll('/workspace/bin/b.dat'))]).toEqual([...binary])
  })

  it('lists, stats, renames and removes', async () => {
    await files.mkdir('/workspace/d/e', true)
    await files.write('/workspace/d/x.txt', chunks('x'))
    expect((await files.list('/workspace/d')).map((e) => [e.name, e.type])).toEqual([
      ['e', 'directory'],
      ['x.txt', 'file'],
    ])
    expect(await files.stat('/workspace/d/x.txt')).toMatchObject({
      path: '/workspace/d/x.txt',
      size: 1,
      type: 'file',
    })
    expect(await files.rename('/workspace/d/x.txt', '/workspace/y.txt')).toMatchObject({
      path: '/workspace/y.txt',
    })
    await files.remove('/workspace/y.txt')
    await expect(files.stat('/workspace/y.txt')).rejects.toMatchObject({ code: 'FILE_NOT_FOUND' })
  })

  it('refuses to remove a non-empty directory without recursive', async () => {
    await files.write('/workspace/d/x.txt', chunks('x'))
    await expect(files.remove('/workspace/d')).rejects.toMatchObject({ code: 'DIRECTORY_NOT_EMPTY' })
    await files.remove('/workspace/d', true)
    await expect(files.stat('/workspace/d')).rejects.toMatchObject({ code: 'FILE_NOT_FOUND' })
  })

  it.each([
    '/workspace/../secret.txt',
    '../secret.txt',
    '/etc/passwd',
    '/workspace/a/../../secret.txt',
    '/workspacefoo/x',
  ])('rejects the traversal %s with PATH_OUTSIDE_SANDBOX', async (path) => {
    await expect(files.read(path)).rejects.toMatchObject({ code: 'PATH_OUTSIDE_SANDBOX' })
    await expect(files.write(path, chunks('pwned'))).rejects.toMatchObject({ code: 'PATH_OUTSIDE_SANDBOX' })
    expect(readFileSync(join(base, 'secret.txt'), 'utf8')).toBe('host secret')
  })

  it('does not follow a symlink out of the workspace', async () => {
    symlinkSync(base, join(root, 'escape'))
    symlinkSync(join(base, 'secret.txt'), join(root, 'link.txt'))
    await expect(readAll('/workspace/escape/secret.txt')).rejects.toMatchObject({
      code: 'PATH_OUTSIDE_SANDBOX',
    })
    await expect(readAll('/workspace/link.txt')).rejects.toMatchObject({ code: 'PATH_OUTSIDE_SANDBOX' })
    await expect(files.write('/workspace/escape/new.txt', chunks('x'))).rejects.toMatchObject({
      code: 'PATH_OUTSIDE_SANDBOX',
    })
    await expect(files.write('/workspace/link.txt', chunks('x'))).rejects.toMatchObject({
      code: 'PATH_OUTSIDE_SANDBOX',
    })
    expect(readFileSync(join(base, 'secret.txt'), 'utf8')).toBe('host secret')
    expect((await files.stat('/workspace/link.txt')).type).toBe('symlink')
  })

  it('gives typed errors for a name too long and a directory moved into itself', async () => {
    await expect(files.write(`/workspace/${'n'.repeat(300)}`, chunks('x'))).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('longer than the filesystem allows'),
    })
    await files.mkdir('/workspace/d/e', true)
    await expect(files.rename('/workspace/d', '/workspace/d/e/d')).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    })
  })

  it('protects the workspace root', async () => {
    await expect(files.remove('/workspace', true)).rejects.toMatchObject({ code: 'FORBIDDEN' })
    await expect(files.read('/workspace')).rejects.toMatchObject({ code: 'IS_A_DIRECTORY' })
  })
})

describe('ownership', () => {
  const owner = { uid: 1000, gid: 1000 }
  const ownerOf = (path: string) => {
    const s = statSync(join(root, path))
    return { uid: s.uid, gid: s.gid }
  }

  it('gives every file and directory it creates to the owner, parents included', async () => {
    const owned = new WorkspaceFiles(new WorkspacePaths(root), { owner })
    await owned.write('/workspace/a/b/c.txt', chunks('x'))
    await owned.mkdir('/workspace/m/n', true)
    await owned.mkdir('/workspace/single')
    for (const path of ['a', 'a/b', 'a/b/c.txt', 'm', 'm/n', 'single']) expect(ownerOf(path)).toEqual(owner)
  })

  it('keeps the owner of what it renames or overwrites', async () => {
    writeFileSync(join(root, 'root-owned.txt'), 'r')
    const owned = new WorkspaceFiles(new WorkspacePaths(root), { owner })
    await owned.write('/workspace/root-owned.txt', chunks('rewritten'))
    expect(ownerOf('root-owned.txt')).toEqual({ uid: process.getuid?.(), gid: process.getgid?.() })
    await owned.write('/workspace/mine.txt', chunks('m'))
    await owned.rename('/workspace/mine.txt', '/workspace/moved.txt')
    expect(ownerOf('moved.txt')).toEqual(owner)
  })

  it('leaves what it creates to the agent without an owner', async () => {
    await files.write('/workspace/a/b.txt', chunks('x'))
    expect(ownerOf('a/b.txt')).toEqual({ uid: process.getuid?.(), gid: process.getgid?.() })
    expect(ownerOf('a')).toEqual({ uid: process.getuid?.(), gid: process.getgid?.() })
  })
})
