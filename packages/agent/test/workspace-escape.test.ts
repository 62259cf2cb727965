// Attacks on the files API by code in the sandbox, which shares the workspace with the agent:
// symlinks that lead out (dangling, in a parent, into /proc), `..`, and a real process that
// swaps a directory for a symlink while the agent works. Each attack must fail with a typed
// error, and the victim (a file and a directory next to the workspace) must be untouched.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { AgentError } from '../src/agent-error.ts'
import { WorkspaceFiles } from '../src/workspace-files.ts'
import { WorkspacePaths } from '../src/workspace-paths.ts'

let base: string
let root: string
let victimDir: string
let files: WorkspaceFiles
const attackers: ChildProcess[] = []

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'conch-escape-')))
  root = join(base, 'workspace')
  victimDir = join(base, 'victim')
  mkdirSync(root)
  mkdirSync(victimDir)
  writeFileSync(join(base, 'secret.txt'), 'host secret')
  writeFileSync(join(victimDir, 'keep.txt'), 'keep me')
  files = new WorkspaceFiles(new WorkspacePaths(root))
})

afterEach(async () => {
  for (const child of attackers.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await once(child, 'exit')
    }
  }
  rmSync(base, { recursive: true, force: true })
})

const chunks = (...parts: string[]) => Readable.from(parts.map((p) => Buffer.from(p)))
const readAll = async (path: string) => {
  const { stream } = await files.read(path)
  const out: Buffer[] = []
  for await (const c of stream) out.push(c as Buffer)
  return Buffer.concat(out).toString()
}
const inWorkspace = (path: string) => join(root, path)

/** The host outside the workspace is as the test left it. */
function expectVictimUnharmed(): void {
  expect(readdirSync(base).sort()).toEqual(['secret.txt', 'victim', 'workspace'])
  expect(readFileSync(join(base, 'secret.txt'), 'utf8')).toBe('host secret')
  expect(readdirSync(victimDir)).toEqual(['keep.txt'])
  expect(readFileSync(join(victimDir, 'keep.txt'), 'utf8')).toBe('keep me')
}

/**
 * Starts a process in the workspace (as code in the sandbox would) that swaps each pair of
 * entries atomically (renameat2 with RENAME_EXCHANGE) as fast as it can; resolves once the
 * first round of swaps is done.
 */
async function swapper(pairs: [string, string][]): Promise<void> {
  const program = [
    'import ctypes, sys',
    'exchange = ctypes.CDLL(None, use_errno=True).renameat2',
    `pairs = [(a.encode(), b.encode()) for a, b in ${JSON.stringify(pairs)}]`,
    'def swap():',
    '    for a, b in pairs: exchange(-100, a, -100, b, 2)',
    'swap()',
    'print("started", flush=True)',
    'while True: swap()',
  ].join('\n')
  const child = spawn('python3', ['-c', program], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] })
  attackers.push(child)
  const [first] = (await once(child.stdout, 'data')) as [Buffer]
  expect(first.toString()).toContain('started')
}

const OUTSIDE = { code: 'PATH_OUTSIDE_SANDBOX' }

describe('a symlink in the final component', () => {
  it('refuses to write through a dangling symlink to a file outside', async () => {
    symlinkSync(join(base, 'planted.txt'), inWorkspace('d'))
    await expect(files.write('/workspace/d', chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    symlinkSync(join(base, 'abs-planted'), inWorkspace('abs'))
    await expect(files.write('/workspace/abs', chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    expect(existsSync(join(base, 'abs-planted'))).toBe(false)
    expectVictimUnharmed()
  })

  it('refuses to read, write or list through a symlink to an existing file or directory outside', async () => {
    symlinkSync(join(base, 'secret.txt'), inWorkspace('s'))
    symlinkSync(victimDir, inWorkspace('v'))
    await expect(readAll('/workspace/s')).rejects.toMatchObject(OUTSIDE)
    await expect(files.write('/workspace/s', chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    await expect(files.list('/workspace/v')).rejects.toMatchObject(OUTSIDE)
    await expect(files.mkdir('/workspace/v', true)).rejects.toMatchObject(OUTSIDE)
    expectVictimUnharmed()
  })

  it('follows a symlink whose target stays inside, creating a dangling target there', async () => {
    mkdirSync(inWorkspace('sub'))
    symlinkSync('sub/new.txt', inWorkspace('rel'))
    symlinkSync('/workspace/sub/abs.txt', inWorkspace('abs'))
    await files.write('/workspace/rel', chunks('via relative'))
    await files.write('/workspace/abs', chunks('via absolute'))
    expect(readFileSync(inWorkspace('sub/new.txt'), 'utf8')).toBe('via relative')
    expect(readFileSync(inWorkspace('sub/abs.txt'), 'utf8')).toBe('via absolute')
    expect(await readAll('/workspace/rel')).toBe('via relative')
    expect((await files.stat('/workspace/rel')).type).toBe('symlink')
    expect(lstatSync(inWorkspace('rel')).isSymbolicLink()).toBe(true)
  })

  it('stats and removes a symlink to outside as the link itself', async () => {
    symlinkSync(join(base, 'secret.txt'), inWorkspace('s'))
    symlinkSync(victimDir, inWorkspace('v'))
    expect(await files.stat('/workspace/s')).toMatchObject({ type: 'symlink' })
    await files.remove('/workspace/s')
    await files.remove('/workspace/v', true)
    expect(readdirSync(root)).toEqual([])
    expectVictimUnharmed()
  })
})

describe('a symlinked parent directory', () => {
  beforeEach(() => symlinkSync(base, inWorkspace('esc')))

  it.each([
    ['read', () => readAll('/workspace/esc/secret.txt')],
    ['write', () => files.write('/workspace/esc/secret.txt', chunks('pwned'))],
    ['write a new file', () => files.write('/workspace/esc/new.txt', chunks('pwned'))],
    ['stat', () => files.stat('/workspace/esc/secret.txt')],
    ['list', () => files.list('/workspace/esc/victim')],
    ['mkdir', () => files.mkdir('/workspace/esc/newdir')],
    ['mkdir -p', () => files.mkdir('/workspace/esc/new/deeper', true)],
    ['remove', () => files.remove('/workspace/esc/secret.txt')],
    ['remove -r', () => files.remove('/workspace/esc/victim', true)],
    ['rename out of it', () => files.rename('/workspace/esc/secret.txt', '/workspace/stolen.txt')],
  ])('refuses to %s through it', async (_, attack) => {
    await expect(attack()).rejects.toMatchObject(OUTSIDE)
    expectVictimUnharmed()
    expect(readdirSync(root)).toEqual(['esc'])
  })

  it('refuses a symlink several levels down, and one reached through another symlink', async () => {
    mkdirSync(inWorkspace('a/b'), { recursive: true })
    symlinkSync('../../esc', inWorkspace('a/b/c'))
    symlinkSync('a/b', inWorkspace('hop'))
    await expect(files.write('/workspace/a/b/c/x.txt', chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    await expect(files.write('/workspace/hop/c/x.txt', chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    expectVictimUnharmed()
  })

  it('follows a parent symlink that stays inside, for mkdir -p and list too', async () => {
    mkdirSync(inWorkspace('real'))
    symlinkSync('real', inWorkspace('alias'))
    await files.mkdir('/workspace/alias/x/y', true)
    await files.write('/workspace/alias/x/y/f.txt', chunks('ok'))
    expect(readFileSync(inWorkspace('real/x/y/f.txt'), 'utf8')).toBe('ok')
    expect((await files.list('/workspace/alias')).map((e) => e.path)).toEqual(['/workspace/alias/x'])
  })
})

describe('/proc and ..', () => {
  it.each([
    ['/proc/self/root', (p: string) => `/workspace/p${p}`],
    ['/proc/self/cwd', () => '/workspace/p/secret.txt'],
    ['/proc/self/fd', () => '/workspace/p/0'],
    ['../../../../../../../proc/self/root', (p: string) => `/workspace/p${p}`],
  ])('refuses a symlink to %s', async (target, path) => {
    symlinkSync(target, inWorkspace('p'))
    const secret = path(join(base, 'secret.txt'))
    await expect(readAll(secret)).rejects.toMatchObject(OUTSIDE)
    await expect(files.write(secret, chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    await expect(files.list(path('/'))).rejects.toMatchObject(OUTSIDE)
    expectVictimUnharmed()
  })

  it.each([
    '/workspace/../secret.txt',
    '/workspace/a/../../secret.txt',
    '/workspace/../../proc/self/root/etc/passwd',
    '../secret.txt',
    '/workspace/../workspace/../secret.txt',
  ])('refuses the path %s before touching the disk', async (path) => {
    await expect(readAll(path)).rejects.toMatchObject(OUTSIDE)
    await expect(files.write(path, chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    await expect(files.remove(path)).rejects.toMatchObject(OUTSIDE)
    expectVictimUnharmed()
  })

  it('refuses a symlink whose .. climbs above the root, and allows one that stays below', async () => {
    mkdirSync(inWorkspace('sub'))
    writeFileSync(inWorkspace('top.txt'), 'top')
    symlinkSync('..', inWorkspace('up'))
    symlinkSync('..', inWorkspace('sub/up'))
    await expect(readAll('/workspace/up/secret.txt')).rejects.toMatchObject(OUTSIDE)
    await expect(files.write('/workspace/up/victim/keep.txt', chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    expect(await readAll('/workspace/sub/up/top.txt')).toBe('top')
    expectVictimUnharmed()
  })

  it('gives a typed error for a symlink loop', async () => {
    symlinkSync('b', inWorkspace('a'))
    symlinkSync('a', inWorkspace('b'))
    const err = await files.read('/workspace/a').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(AgentError)
    expect(err).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('symlinks') })
  })
})

describe('rename', () => {
  beforeEach(() => {
    symlinkSync(base, inWorkspace('esc'))
    writeFileSync(inWorkspace('a.txt'), 'mine')
  })

  it('refuses to move a file out through a symlinked directory', async () => {
    await expect(files.rename('/workspace/a.txt', '/workspace/esc/a.txt')).rejects.toMatchObject(OUTSIDE)
    await expect(files.rename('/workspace/a.txt', '/workspace/esc/secret.txt')).rejects.toMatchObject(OUTSIDE)
    expect(readFileSync(inWorkspace('a.txt'), 'utf8')).toBe('mine')
    expectVictimUnharmed()
  })

  it('replaces a symlink it renames onto, leaving the link target alone', async () => {
    symlinkSync(join(base, 'secret.txt'), inWorkspace('link'))
    expect(await files.rename('/workspace/a.txt', '/workspace/link')).toMatchObject({
      path: '/workspace/link',
      type: 'file',
    })
    expect(readFileSync(inWorkspace('link'), 'utf8')).toBe('mine')
    expectVictimUnharmed()
  })

  it('moves a symlink as a link without following it', async () => {
    expect(await files.rename('/workspace/esc', '/workspace/moved')).toMatchObject({ type: 'symlink' })
    expect(readlinkSync(inWorkspace('moved'))).toBe(base)
    expectVictimUnharmed()
  })
})

describe('special files', () => {
  it('refuses to read or write a FIFO instead of hanging on it', async () => {
    execFileSync('mkfifo', [inWorkspace('fifo')])
    await expect(files.read('/workspace/fifo')).rejects.toMatchObject({ code: 'FORBIDDEN' })
    await expect(files.write('/workspace/fifo', chunks('x'))).rejects.toMatchObject({ code: 'FORBIDDEN' })
  })
})

describe('a directory swapped for a symlink mid-request', () => {
  it('keeps a large write in progress on the file it opened', async () => {
    mkdirSync(inWorkspace('d'))
    const MiB = 1 << 20
    let firstWritten!: () => void
    const written = new Promise<void>((resolve) => {
      firstWritten = resolve
    })
    let release!: () => void
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    async function* upload() {
      yield Buffer.alloc(MiB, 1)
      // The writer asks for the next chunk only once the first is on disk.
      firstWritten()
      await gate
      for (let i = 0; i < 15; i++) yield Buffer.alloc(MiB, 2)
    }
    const writing = files.write('/workspace/d/big.bin', upload())
    await written
    renameSync(inWorkspace('d'), inWorkspace('d.moved'))
    symlinkSync(base, inWorkspace('d'))
    release()
    expect(await writing).toMatchObject({ size: 16 * MiB })
    expect(readFileSync(inWorkspace('d.moved/big.bin')).length).toBe(16 * MiB)
    expectVictimUnharmed()
    await expect(files.write('/workspace/d/big.bin', chunks('pwned'))).rejects.toMatchObject(OUTSIDE)
    expectVictimUnharmed()
  })

  it('never writes, reads or removes outside while a process swaps the directory in a loop', async () => {
    mkdirSync(inWorkspace('d'))
    writeFileSync(inWorkspace('d/secret.txt'), 'inside')
    symlinkSync(base, inWorkspace('d.link'))
    await swapper([['d', 'd.link']])
    const allowed = ['PATH_OUTSIDE_SANDBOX', 'FILE_NOT_FOUND', 'NOT_A_DIRECTORY']
    const outcomes = new Map<string, number>()
    for (let i = 0; i < 150; i++) {
      for (const attempt of [
        () => files.write(`/workspace/d/w${i}.txt`, chunks('from the agent')),
        () => readAll('/workspace/d/secret.txt'),
        () => files.mkdir(`/workspace/d/m${i}/n`, true),
        () => files.remove(`/workspace/d/w${i}.txt`),
        () => files.list('/workspace/d'),
      ]) {
        try {
          const value = await attempt()
          if (typeof value === 'string') expect(value).toBe('inside')
          outcomes.set('ok', (outcomes.get('ok') ?? 0) + 1)
        } catch (err) {
          expect(err).toBeInstanceOf(AgentError)
          expect(allowed).toContain((err as AgentError).code)
          outcomes.set((err as AgentError).code, (outcomes.get((err as AgentError).code) ?? 0) + 1)
        }
      }
    }
    expectVictimUnharmed()
    // The race was real: some requests met the directory and some the symlink.
    expect(outcomes.get('ok')).toBeGreaterThan(0)
    expect(outcomes.get('PATH_OUTSIDE_SANDBOX')).toBeGreaterThan(0)
  })

  it('removes a tree recursively without following a subdirectory swapped for a symlink', async () => {
    for (let i = 0; i < 20; i++) {
      mkdirSync(inWorkspace(`t/d${i}/e`), { recursive: true })
      writeFileSync(inWorkspace(`t/d${i}/e/f.txt`), 'x')
      symlinkSync(victimDir, inWorkspace(`t/l${i}`))
    }
    await swapper(Array.from({ length: 20 }, (_, i): [string, string] => [`t/d${i}`, `t/l${i}`]))
    // The swaps may make the removal fail (an entry vanishes under it): then with a typed error.
    const err = await files.remove('/workspace/t', true).catch((e: unknown) => e)
    if (err !== undefined) expect(err).toBeInstanceOf(AgentError)
    expectVictimUnharmed()
  })
})
