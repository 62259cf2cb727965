// A runner killed inside a create leaves a sandbox nobody recorded: its folder, its loop-mounted
// disk, its cgroups and (namespace driver) its held process chain. These tests make that leftover
// for real (a runner process that creates and dies) and check that the next runner destroys it
// before it serves, and that nothing else is touched: recorded sandboxes, creates under way,
// another driver's folders, and hostile entries in the sandboxes folder (symlinks, files). Real
// bubblewrap, cgroups and loop devices; they fail (never skip) when the host cannot run them.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DEFAULT_SANDBOX_LIMITS } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { afterAll, describe, expect, it } from 'vitest'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import type { SandboxSpec } from '../src/drivers/sandbox-driver.ts'
import { CREATED_FILE } from '../src/drivers/unrecorded-sandboxes.ts'
import { createDisk } from '../src/drivers/workspace-disk.ts'
import { nsRunner } from './namespace-runner.ts'

const roots: string[] = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'conch-unrecorded-'))
  roots.push(dir)
  return dir
}

function spec(): SandboxSpec {
  return {
    id: `sb_unrec${Math.random().toString(36).slice(2, 10)}`,
    env: {},
    limits: { ...DEFAULT_SANDBOX_LIMITS, diskBytes: 64 * 1024 * 1024 },
    scrollbackBytes: 1 << 20,
    maxSessions: 8,
    linkSecret: mintLinkSecret(),
  }
}

/** Whether something is mounted at `path` (this process's mount namespace). */
function mounted(path: string): boolean {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[4] === path)
}

interface Leftover {
  id: string
  dir: string
  /** The sandbox's cgroup dirs. */
  cgroupDirs: string[]
}

/** A runner process that creates a namespace sandbox in `root` and is killed before it records it. */
function createAndDie(root: string): Leftover {
  const driverModule = fileURLToPath(new URL('../src/drivers/namespace-driver.ts', import.meta.url))
  const s = spec()
  const code = `
    import { NamespaceDriver } from ${JSON.stringify(driverModule)}
    const driver = new NamespaceDriver({ stateDir: ${JSON.stringify(root)} })
    const created = await driver.create(${JSON.stringify(s)})
    process.stdout.write(JSON.stringify(created.state))
    process.kill(process.pid, 'SIGKILL')
  `
  const out = spawnSync(process.execPath, ['--conditions=source', '--input-type=module', '-e', code], {
    encoding: 'utf8',
    timeout: 60_000,
  })
  expect(out.signal, out.stderr).toBe('SIGKILL')
  const state = JSON.parse(out.stdout) as { dir: string; cgroup: { dirs: string[] } | null }
  if (state.cgroup === null) throw new Error('the namespace sandbox has no cgroups; run the tests as root')
  return { id: s.id, dir: state.dir, cgroupDirs: state.cgroup.dirs }
}

function expectGone(leftover: Leftover): void {
  expect(mounted(join(leftover.dir, 'disk'))).toBe(false)
  expect(existsSync(leftover.dir)).toBe(false)
  for (const dir of leftover.cgroupDirs) expect(existsSync(dir), dir).toBe(false)
}

describe('sandboxes a killed runner never recorded', () => {
  it('are destroyed by the next runner before it serves: disk unmounted, cgroups and folder gone', async () => {
    const root = stateDir()
    const leftover = createAndDie(root)
    expect(mounted(join(leftover.dir, 'disk'))).toBe(true)
    expect(existsSync(join(leftover.dir, CREATED_FILE))).toBe(true)
    // The record holds no link secret: destroying needs none.
    expect(readFileSync(join(leftover.dir, CREATED_FILE), 'utf8')).not.toMatch(/"linkSecret":"[^"]/)

    await using runner = await nsRunner({ stateDir: root, removeStateDir: true })
    expectGone(leftover)
    // The runner serves normally afterwards.
    const res = await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: runner.auth })
    expect(res.statusCode).toBe(200)
  })

  it('leaves recorded sandboxes and creates under way alone', async () => {
    const root = stateDir()
    const driver = new NamespaceDriver({ stateDir: root })
    const recorded = await driver.create(spec())
    const pending = driver.create(spec())
    try {
      expect(await driver.reapUnrecorded(new Set([recorded.id]))).toEqual([])
      expect(mounted(join((recorded.state as { dir: string }).dir, 'disk'))).toBe(true)
    } finally {
      await driver.destroy(recorded)
      await driver.destroy(await pending)
    }
  })

  it('removes a folder that died before its record (its disk mounted), and reports it', async () => {
    const root = stateDir()
    const id = 'sb_unrecnorecord'
    const dir = join(root, 'sandboxes', id)
    mkdirSync(dir, { recursive: true })
    await createDisk(dir, 64 * 1024 * 1024, 1000)
    expect(mounted(join(dir, 'disk'))).toBe(true)
    const driver = new NamespaceDriver({ stateDir: root })
    expect(await driver.reapUnrecorded(new Set())).toEqual([id])
    expectGone({ id, dir, cgroupDirs: [] })
  })

  it('never follows or deletes hostile entries, nor a folder another driver recorded', async () => {
    const root = stateDir()
    const sandboxes = join(root, 'sandboxes')
    mkdirSync(sandboxes, { recursive: true })
    const victim = join(root, 'victim')
    mkdirSync(victim)
    writeFileSync(join(victim, 'precious'), 'keep me')
    symlinkSync(victim, join(sandboxes, 'sb_symlinked'))
    writeFileSync(join(sandboxes, 'sb_file'), 'a file, not a sandbox')
    const other = join(sandboxes, 'sb_othersdriver')
    mkdirSync(other)
    writeFileSync(join(other, CREATED_FILE), JSON.stringify({ driver: 'gvisor', state: { dir: victim } }))

    const driver = new NamespaceDriver({ stateDir: root })
    expect(await driver.reapUnrecorded(new Set())).toEqual([])
    expect(readFileSync(join(victim, 'precious'), 'utf8')).toBe('keep me')
    expect(existsSync(join(sandboxes, 'sb_symlinked'))).toBe(true)
    expect(existsSync(join(sandboxes, 'sb_file'))).toBe(true)
    expect(existsSync(other)).toBe(true)
  })
})
