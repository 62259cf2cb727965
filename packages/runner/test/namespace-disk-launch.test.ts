// As root, the namespace driver has the sandbox's first process (`sh`, before bwrap) format and
// mount the workspace disk, and report on a pipe, so the runner spawns no mkfs or mount per
// sandbox. These tests attack that step: a format that fails must surface as the typed error the
// runner's own mkfs gave and leave no process, mount, loop device or cgroup, and a runner killed
// while the disk is being formatted must leave nothing running and nothing mounted. A disk
// formatted ahead of time (the spare) must be fresh and used once: no file one sandbox wrote
// reaches another through it. Real
// mkfs.ext4, loop devices, cgroups and bubblewrap; they fail (never skip) when the host cannot
// run namespace sandboxes with a disk limit.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DEFAULT_SANDBOX_LIMITS } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import type { SandboxSpec } from '../src/drivers/sandbox-driver.ts'

const stateDir = mkdtempSync(join(tmpdir(), 'conch-ns-disk-'))
afterAll(() => rmSync(stateDir, { recursive: true, force: true }))

function spec(diskBytes = DEFAULT_SANDBOX_LIMITS.diskBytes): SandboxSpec {
  return {
    id: `sb_disk${Math.random().toString(36).slice(2, 10)}`,
    env: {},
    limits: { ...DEFAULT_SANDBOX_LIMITS, diskBytes },
    scrollbackBytes: 1 << 20,
    maxSessions: 8,
    linkSecret: mintLinkSecret(),
  }
}

/** Pids of the processes whose command line names `needle`. */
function processesNaming(needle: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) found.push(Number(entry))
    } catch {
      // gone
    }
  }
  return found
}

/** Mount points under `dir`. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((point) => point.startsWith(dir))
}

/** Loop devices whose backing file lies under `dir`. */
function loopsUnder(dir: string): string[] {
  const out = spawnSync('losetup', ['-l', '-n', '-O', 'NAME,BACK-FILE'], { encoding: 'utf8' })
  if (out.status !== 0) throw new Error(`losetup failed: ${out.stderr}`)
  return out.stdout.split('\n').filter((line) => line.includes(dir))
}

/** Cgroup folders named for the sandbox. */
function cgroupsNamed(id: string): string[] {
  const out = spawnSync('find', ['/sys/fs/cgroup', '-maxdepth', '6', '-type', 'd', '-name', `*${id}*`], {
    encoding: 'utf8',
  })
  return out.stdout.split('\n').filter((line) => line !== '')
}

describe('namespace driver: the disk formatted by the sandbox launcher', () => {
  it('gives the runner mkfs error when the format fails, and leaves no process, mount, loop device or cgroup', async () => {
    const driver = new NamespaceDriver({ stateDir })
    const problem = driver.problem(spec())
    if (problem) throw new Error(`this host cannot run namespace sandboxes with a disk: ${problem}`)
    // Too small for ext4: the launcher's mkfs fails.
    const s = spec(4096)
    const dir = join(stateDir, 'sandboxes', s.id)
    await expect(driver.create(s)).rejects.toMatchObject({
      code: 'AGENT_UNAVAILABLE',
      message: expect.stringMatching(/^mkfs\.ext4 .* failed: .*(space|small)/),
    })
    expect(processesNaming(s.id)).toEqual([])
    expect(mountsUnder(dir)).toEqual([])
    expect(loopsUnder(dir)).toEqual([])
    expect(cgroupsNamed(s.id)).toEqual([])
    expect(existsSync(join(dir, 'disk.img'))).toBe(false)
  })

  it('mounts the disk nodev,nosuid before create returns, with the workspace on it', async () => {
    const driver = new NamespaceDriver({ stateDir })
    const s = spec()
    const created = await driver.create(s)
    const dir = (created.state as { dir: string }).dir
    try {
      const line = readFileSync('/proc/self/mounts', 'utf8')
        .split('\n')
        .find((l) => l.split(' ')[1] === join(dir, 'disk'))
      expect(line).toMatch(/ ext4 .*nosuid.*nodev|ext4 .*nodev.*nosuid/)
      expect(existsSync(join(dir, 'disk', 'workspace'))).toBe(true)
      expect(loopsUnder(dir)).toHaveLength(1)
    } finally {
      await driver.destroy(created)
    }
    expect(mountsUnder(dir)).toEqual([])
    expect(loopsUnder(dir)).toEqual([])
    expect(existsSync(dir)).toBe(false)
  })

  it('takes a spare formatted ahead of time: fresh, empty, used once, never a disk a sandbox wrote to', async () => {
    const driver = new NamespaceDriver({ stateDir })
    const sparesDir = join(stateDir, 'disk-spares')
    const spare = join(sparesDir, `${DEFAULT_SANDBOX_LIMITS.diskBytes}.img`)
    const first = await driver.create(spec())
    const firstDir = (first.state as { dir: string }).dir
    const firstImage = statSync(join(firstDir, 'disk.img')).ino
    writeFileSync(join(firstDir, 'disk', 'workspace', 'secret'), 'written by the first sandbox')
    // The first create's chain formats the next spare once its own disk is mounted.
    await vi.waitFor(
      () =>
        expect(
          existsSync(spare) && readdirSync(sparesDir).every((name) => !name.endsWith('.tmp')),
          'a spare, and no format under way',
        ).toBe(true),
      { timeout: 20000, interval: 20 },
    )
    const spareImage = statSync(spare).ino
    expect(spareImage).not.toBe(firstImage)
    await driver.destroy(first)
    const second = await driver.create(spec())
    const dir = (second.state as { dir: string }).dir
    try {
      expect(statSync(join(dir, 'disk.img')).ino).toBe(spareImage)
      expect(readdirSync(join(dir, 'disk', 'workspace'))).toEqual([])
      const line = readFileSync('/proc/self/mounts', 'utf8')
        .split('\n')
        .find((l) => l.split(' ')[1] === join(dir, 'disk'))
      expect(line).toMatch(/ ext4 .*nosuid.*nodev|ext4 .*nodev.*nosuid/)
    } finally {
      await driver.destroy(second)
    }
    // Used once: whatever spare is kept now is another file.
    if (existsSync(spare)) expect(statSync(spare).ino).not.toBe(spareImage)
  })

  it('leaves nothing running and nothing mounted when the runner is killed while the disk is formatted', async () => {
    const driverModule = fileURLToPath(new URL('../src/drivers/namespace-driver.ts', import.meta.url))
    // A size no spare was formatted for, so the launcher formats the disk itself.
    const s = spec(DEFAULT_SANDBOX_LIMITS.diskBytes - 64 * 1024 * 1024)
    const dir = join(stateDir, 'sandboxes', s.id)
    const code = `
      import { NamespaceDriver } from ${JSON.stringify(driverModule)}
      const driver = new NamespaceDriver({ stateDir: ${JSON.stringify(stateDir)} })
      await driver.create(${JSON.stringify(s)})
      process.stdout.write('created')
    `
    const runner = spawn(process.execPath, ['--conditions=source', '--input-type=module', '-e', code], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    runner.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk
    })
    const exited = new Promise((resolve) => runner.once('exit', resolve))
    try {
      // Kill it as soon as its launcher (whose arguments name the disk image) is running.
      await new Promise<void>((resolve, reject) => {
        const poll = (): void => {
          if (out !== '') reject(new Error('create finished before the runner could be killed'))
          else if (processesNaming(join(dir, 'disk.img')).length > 0) {
            runner.kill('SIGKILL')
            resolve()
          } else setImmediate(poll)
        }
        poll()
      })
      await exited
      expect(out).toBe('')
      await vi.waitFor(
        () => expect(processesNaming(s.id).length === 0, 'the launcher and its format to end').toBe(true),
        { timeout: 20000, interval: 20 },
      )
      expect(mountsUnder(dir)).toEqual([])
      expect(loopsUnder(dir)).toEqual([])
      expect(existsSync(join(dir, 'disk.img'))).toBe(false)
    } finally {
      runner.kill('SIGKILL')
      // The dead runner's cgroups, as a restarted runner's cleanup would remove them.
      for (const group of cgroupsNamed(s.id))
        spawnSync('find', [group, '-depth', '-type', 'd', '-exec', 'rmdir', '{}', ';'])
    }
  })
})
