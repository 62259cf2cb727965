// The runtime image's lifecycle (runtime-image.ts, runtime-image-sweep.ts) on real loop devices
// and mounts, with tiny runtimes: release, a sweep racing acquires from another process, hostile
// entries in the cache dir and the states a crash leaves. Needs root; fails, never skips.
import { spawn, spawnSync } from 'node:child_process'
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { RuntimeImage } from '../src/drivers/runtime-image.ts'
import {
  IMAGE_IDLE_MS,
  isMountPoint,
  LOCK_STALE_MS,
  sweepRuntimeImages,
} from '../src/drivers/runtime-image-sweep.ts'
import { RunnerError } from '../src/runner-error.ts'
import {
  eventually,
  farFuture,
  imageCache,
  loopDevicesOf,
  mountsUnder,
  tinyRuntime,
} from './runtime-image-cache.ts'

const SWEEP_MODULE = fileURLToPath(new URL('../src/drivers/runtime-image-sweep.ts', import.meta.url))

function sourceDir(cache: string): string {
  const dir = join(cache, 'src')
  mkdirSync(dir, { recursive: true })
  return dir
}

function backdate(path: string, ms: number): void {
  const past = new Date(Date.now() - ms)
  utimesSync(path, past, past)
}

/** Backdates `path`; false when it is not there (a sweeper has it renamed away). */
function backdateIfThere(path: string, ms: number): boolean {
  try {
    backdate(path, ms)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    return false
  }
}

describe('runtime image lifecycle', () => {
  it('a sweep waits for umount without holding the event loop: the runner keeps serving meanwhile', async () => {
    await using cache = imageCache()
    const image = new RuntimeImage(tinyRuntime(sourceDir(cache.dir)), cache.dir)
    await image.acquire()
    let sweepEnded = false
    const sweeping = sweepRuntimeImages(cache.dir, { now: Date.now() + IMAGE_IDLE_MS + 1 }).then((report) => {
      sweepEnded = true
      return report
    })
    // A sweep that ran umount synchronously would have ended before the loop's next turn.
    const turnDuringSweep = await new Promise<boolean>((resolve) => setImmediate(() => resolve(!sweepEnded)))
    expect(turnDuringSweep).toBe(true)
    expect((await sweeping).released).toEqual([image.key])
  })

  it('keeps an image acquired within the idle limit and releases it fully once idle', async () => {
    await using cache = imageCache()
    const image = new RuntimeImage(tinyRuntime(sourceDir(cache.dir)), cache.dir)
    const runtime = await image.acquire()
    const at = (suffix: string): string => join(cache.dir, `${image.key}${suffix}`)
    expect(isMountPoint(at(''))).toBe(true)
    expect(readFileSync(runtime.mounts[0]?.host ?? '', 'utf8')).toMatch(/exit 2/)
    expect(loopDevicesOf(at('.img'))).toHaveLength(1)

    expect((await sweepRuntimeImages(cache.dir)).kept).toContain(image.key)
    expect(isMountPoint(at(''))).toBe(true)

    const report = await sweepRuntimeImages(cache.dir, { now: Date.now() + IMAGE_IDLE_MS + 1 })
    expect(report.released).toEqual([image.key])
    expect(isMountPoint(at(''))).toBe(false)
    expect(await eventually(() => loopDevicesOf(at('.img')).length === 0)).toBe(true)
    expect(readdirSync(cache.dir).filter((name) => name.startsWith(image.key))).toEqual([])

    // The next acquire builds and mounts it again.
    await image.acquire()
    expect(isMountPoint(at(''))).toBe(true)
  })

  it('never lets a sweep in another process unmount an image between its acquire and a bind of it', async () => {
    await using cache = imageCache()
    const image = new RuntimeImage(tinyRuntime(sourceDir(cache.dir), 'race'), cache.dir)
    const used = join(cache.dir, `${image.key}.used`)
    const stop = join(cache.dir, 'stop')
    // The sweeper releases any image whose stamp is a minute old, as fast as it can.
    const sweeper = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { existsSync } from 'node:fs'
         import { sweepRuntimeImages } from ${JSON.stringify(SWEEP_MODULE)}
         let released = 0
         while (!existsSync(${JSON.stringify(stop)})) released += (await sweepRuntimeImages(${JSON.stringify(cache.dir)}, { idleMs: 60_000 })).released.length
         process.stdout.write(String(released))`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    let out = ''
    sweeper.stdout.on('data', (chunk) => {
      out += chunk
    })
    const exited = new Promise((resolve) => sweeper.on('exit', resolve))
    const target = join(cache.dir, 'bound')
    writeFileSync(target, '')
    try {
      for (let i = 0; i < 20; i++) {
        // The image looks idle: the sweeper may release it at any moment from here on.
        // (The sweeper may hold the stamp renamed while it looks at it: backdated once it is back.)
        const mountPoint = join(cache.dir, image.key)
        if (i > 0)
          expect(
            await eventually(() => backdateIfThere(used, 10 * 60_000) || !isMountPoint(mountPoint)),
          ).toBe(true)
        if (i % 2 === 0) expect(await eventually(() => !isMountPoint(mountPoint))).toBe(true)
        const [runtime] = await Promise.all([image.acquire(), image.acquire()])
        // What bwrap does with it: a bind of the file from the host mount.
        const bind = spawnSync('mount', ['--bind', runtime?.mounts[0]?.host ?? '', target], {
          encoding: 'utf8',
        })
        expect(bind.stderr).toBe('')
        expect(readFileSync(target, 'utf8')).toMatch(/# race/)
        spawnSync('umount', [target])
      }
    } finally {
      writeFileSync(stop, '')
      await exited
    }
    // Every other round waited for a release (the first had nothing to release).
    expect(Number(out)).toBeGreaterThanOrEqual(9)
  }, 180_000)

  it('never follows, unmounts or deletes anything outside the cache dir for hostile entries', async () => {
    await using cache = imageCache()
    await using outside = imageCache()
    const secret = join(outside.dir, 'secret')
    writeFileSync(secret, 'keep me')
    backdate(secret, 60_000)
    const secretTime = statSync(secret).mtimeMs
    const mnt = join(outside.dir, 'mnt')
    mkdirSync(mnt)
    expect(spawnSync('mount', ['-t', 'tmpfs', 'tmpfs', mnt]).status).toBe(0)
    writeFileSync(join(mnt, 'inside'), 'x')
    const c = (name: string): string => join(cache.dir, name)
    symlinkSync(secret, c('aaaaaaaaaaaaaaaa.img'))
    symlinkSync(mnt, c('bbbbbbbbbbbbbbbb'))
    writeFileSync(c('bbbbbbbbbbbbbbbb.used.sweeping'), '')
    mkdirSync(c('cccccccccccccccc.img'))
    writeFileSync(c('cccccccccccccccc.img/file'), 'x')
    symlinkSync(secret, c('dddddddddddddddd.used'))
    writeFileSync(c('eeeeeeeeeeeeeeee.img'), 'not an image')
    symlinkSync(secret, c('ffffffffffffffff.img.123'))
    symlinkSync(outside.dir, c('0000000000000000.lock'))
    writeFileSync(c('not-an-image'), 'x')

    const report = await sweepRuntimeImages(cache.dir, { now: farFuture() })
    expect(readFileSync(secret, 'utf8')).toBe('keep me')
    expect(statSync(secret).mtimeMs).toBe(secretTime)
    expect(isMountPoint(mnt)).toBe(true)
    expect(existsSync(join(mnt, 'inside'))).toBe(true)
    expect(existsSync(c('cccccccccccccccc.img/file'))).toBe(true)
    for (const link of [
      'aaaaaaaaaaaaaaaa.img',
      'bbbbbbbbbbbbbbbb',
      'dddddddddddddddd.used',
      'ffffffffffffffff.img.123',
    ])
      expect(lstatSync(c(link)).isSymbolicLink()).toBe(true)
    expect(existsSync(c('eeeeeeeeeeeeeeee.img'))).toBe(false)
    expect(existsSync(c('not-an-image'))).toBe(true)
    expect(report.ignored).toEqual(
      expect.arrayContaining(['aaaaaaaaaaaaaaaa.img', 'bbbbbbbbbbbbbbbb', 'dddddddddddddddd.used']),
    )

    // An acquire refuses an image or mount point that is a symlink, with a code and what to do.
    const image = new RuntimeImage(tinyRuntime(sourceDir(cache.dir)), cache.dir)
    symlinkSync(secret, c(`${image.key}.img`))
    const refused = await image.acquire().catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(RunnerError)
    expect(refused).toMatchObject({ code: 'AGENT_UNAVAILABLE', message: expect.stringMatching(/remove it/) })
    renameSync(c(`${image.key}.img`), c('moved'))
    symlinkSync(mnt, c(image.key))
    await expect(image.acquire()).rejects.toMatchObject({ code: 'AGENT_UNAVAILABLE' })
    expect(mountsUnder(outside.dir)).toEqual([mnt])
    expect(readFileSync(secret, 'utf8')).toBe('keep me')
    spawnSync('umount', [mnt])
  })

  it('repairs what a sweep that crashed between its steps left, at the next acquire and sweep', async () => {
    await using cache = imageCache()
    const image = new RuntimeImage(tinyRuntime(sourceDir(cache.dir)), cache.dir)
    const at = (suffix: string): string => join(cache.dir, `${image.key}${suffix}`)
    await image.acquire()
    // The sweeper took the lock, renamed the stamp, unmounted the image and died.
    mkdirSync(at('.lock'))
    backdate(at('.lock'), LOCK_STALE_MS + 60_000)
    renameSync(at('.used'), at('.used.sweeping'))
    expect(spawnSync('umount', ['-l', at('')]).status).toBe(0)
    // A runner starting now finds its image unmounted and the lock stale: it mounts it again.
    await image.acquire()
    expect(isMountPoint(at(''))).toBe(true)
    expect(existsSync(at('.lock'))).toBe(false)
    expect((await sweepRuntimeImages(cache.dir)).kept).toEqual([image.key])
    expect(existsSync(at('.used.sweeping'))).toBe(false)

    // A sweeper died after deleting the file: an orphan mount point and its stale lock.
    backdate(at('.used'), IMAGE_IDLE_MS + 60_000)
    mkdirSync(at('.lock'))
    backdate(at('.lock'), LOCK_STALE_MS + 60_000)
    renameSync(at('.used'), at('.used.sweeping'))
    const loops = loopDevicesOf(at('.img'))
    expect(loops).toHaveLength(1)
    spawnSync('umount', ['-l', at('')])
    spawnSync('rm', [at('.img')])
    expect((await sweepRuntimeImages(cache.dir)).released).toEqual([image.key])
    expect(readdirSync(cache.dir).filter((name) => name.startsWith(image.key))).toEqual([])
    expect(await eventually(() => loopDevicesOf(at('.img')).length === 0)).toBe(true)
  })

  it('releases the staging mount, loop device and temp file of a build that crashed', async () => {
    await using cache = imageCache()
    const key = '1234567890abcdef'
    const at = (suffix: string): string => join(cache.dir, `${key}${suffix}`)
    const temp = at('.img.99999')
    expect(spawnSync('truncate', ['-s', '64M', temp]).status).toBe(0)
    expect(spawnSync('mkfs.ext4', ['-q', '-F', temp]).status).toBe(0)
    mkdirSync(at('.staging'))
    expect(spawnSync('mount', ['-o', 'loop', temp, at('.staging')]).status).toBe(0)
    mkdirSync(at('.lock'))
    backdate(at('.lock'), LOCK_STALE_MS + 60_000)
    expect((await sweepRuntimeImages(cache.dir)).released).toEqual([key])
    expect(mountsUnder(cache.dir)).toEqual([])
    expect(readdirSync(cache.dir)).toEqual([])
    expect(await eventually(() => loopDevicesOf(temp).length === 0)).toBe(true)
  })

  it('keeps an image another builder holds locked, and one made before stamps until it is a day old', async () => {
    await using cache = imageCache()
    const image = new RuntimeImage(tinyRuntime(sourceDir(cache.dir)), cache.dir)
    const at = (suffix: string): string => join(cache.dir, `${image.key}${suffix}`)
    await image.acquire()
    mkdirSync(at('.lock'))
    expect((await sweepRuntimeImages(cache.dir, { now: farFuture() })).kept).toEqual([image.key])
    expect(isMountPoint(at(''))).toBe(true)
    spawnSync('rmdir', [at('.lock')])
    // Made by a runner before stamps existed: only the file's age says when it was made.
    spawnSync('rm', [at('.used')])
    expect((await sweepRuntimeImages(cache.dir, { now: Date.now() + IMAGE_IDLE_MS * 2 })).kept).toEqual([
      image.key,
    ])
    expect((await sweepRuntimeImages(cache.dir, { now: farFuture() })).released).toEqual([image.key])
    expect(isMountPoint(at(''))).toBe(false)
  })
})
