// removeCgroupDirs against the kernel's own EBUSY. A group whose last task is still exiting
// refuses rmdir with EBUSY for a moment, which cannot be timed from a test; a directory with a
// mount on it refuses rmdir with the same EBUSY until the mount goes, which can. These tests
// need root (mount); they fail, never skip, elsewhere.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { RunnerError } from '../runner-error.ts'
import { removeCgroupDirs } from './cgroup-files.ts'

const roots: string[] = []
afterEach(() => {
  for (const root of roots.splice(0)) {
    const busy = join(root, 'busy')
    if (existsSync(busy) && spawnSync('mountpoint', ['-q', busy]).status === 0)
      execFileSync('umount', ['-l', busy])
    rmSync(root, { recursive: true, force: true })
  }
})

/** A temp dir holding `busy`, with a tmpfs mounted on it so rmdir says EBUSY, and a plain `leaf`. */
function busyDirs(): { busy: string; leaf: string } {
  const root = mkdtempSync(join(tmpdir(), 'conch-cgroup-rm-'))
  roots.push(root)
  const busy = join(root, 'busy')
  const leaf = join(root, 'leaf')
  mkdirSync(busy)
  mkdirSync(leaf)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'conch-test', busy])
  return { busy, leaf }
}

describe('removeCgroupDirs', () => {
  it('tries a busy dir again until it frees, then removes it and the dirs after it', async () => {
    const { busy, leaf } = busyDirs()
    let unmounted = false
    const removing = removeCgroupDirs([busy, leaf], 10_000)
    // The removal has met EBUSY and is waiting; freeing the dir lets it finish.
    setTimeout(() => {
      execFileSync('umount', [busy])
      unmounted = true
    }, 50)
    await removing
    expect(unmounted).toBe(true)
    expect(existsSync(busy)).toBe(false)
    expect(existsSync(leaf)).toBe(false)
  })

  it('a dir that stays busy ends in INTERNAL naming it, and nothing after it is removed', async () => {
    const { busy, leaf } = busyDirs()
    const error = await removeCgroupDirs([busy, leaf], 100).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(RunnerError)
    expect((error as RunnerError).code).toBe('INTERNAL')
    expect((error as RunnerError).message).toContain(`cannot remove the cgroup ${busy} (EBUSY)`)
    expect(existsSync(leaf)).toBe(true)
  })

  it('a dir already gone is fine', async () => {
    const { leaf } = busyDirs()
    await removeCgroupDirs([join(leaf, 'never-made'), leaf], 100)
    expect(existsSync(leaf)).toBe(false)
  })

  it('a dir that is not empty fails at once: only EBUSY is worth waiting for', async () => {
    const { leaf } = busyDirs()
    mkdirSync(join(leaf, 'child'))
    const error = await removeCgroupDirs([leaf], 10_000).catch((caught: unknown) => caught)
    expect((error as RunnerError).message).toContain('(ENOTEMPTY)')
  })
})
