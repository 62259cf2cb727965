// Releasing the runtime images (runtime-image.ts) that no runner wants any more. An image is
// wanted while its use stamp `<key>.used` is younger than the idle limit: every acquire touches
// it, and a runner touches the stamps of the images it holds every minute while it lives.
// Releasing one, under its key's lock dir (the lock its builders take):
//   1. `<key>.used` is renamed to `<key>.used.sweeping`. An acquire that touched the stamp before
//      the rename shows in its mtime (checked again after the rename: young, so it is renamed back
//      and kept); one that touches it after fails (ENOENT), takes the lock and mounts again.
//   2. The host mount is unmounted lazily. A live sandbox keeps its binds (namespace driver) or
//      its gofer's binds (gVisor): the ext4 superblock lives while any mount namespace holds it,
//      and the loop device (set up with autoclear by `mount -o loop`) is freed with its last mount.
//   3. The image file is unlinked (the loop device holds it open until then), the mount point and
//      the `.sweeping` stamp removed. A crash between steps leaves `.sweeping` or an orphan mount
//      point: the next sweep finishes the job.
// Images with no stamp were made before stamps existed: they are released when their file is
// older than LEGACY_IDLE_MS. Entries are only ever lstat'ed, unlinked or rmdir'ed, never followed:
// a symlink or a file of the wrong kind under an image's name is left where it is.
import { spawn } from 'node:child_process'
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  type Stats,
  unlinkSync,
} from 'node:fs'
import { join } from 'node:path'

/** An image whose stamp is older than this (ms) is released; runners refresh theirs every minute. */
export const IMAGE_IDLE_MS = 15 * 60_000

/** An image made before use stamps existed is released once its file is older than this (ms). */
export const LEGACY_IDLE_MS = 24 * 60 * 60_000

/** A lock dir older than this (ms) belongs to a crashed builder or sweeper and is taken over. */
export const LOCK_STALE_MS = 5 * 60_000

/** Names the cache dir may hold for an image key; anything else is never touched. */
const ENTRY = /^([0-9a-f]{16})(\.img|\.used|\.used\.sweeping|\.lock|\.staging|\.img\.\d+)?$/

/** Options of a sweep. */
export interface SweepOptions {
  /** Stamps older than this (ms) are released; default IMAGE_IDLE_MS. */
  idleMs?: number
  /** Images without a stamp older than this (ms) are released; default LEGACY_IDLE_MS. */
  legacyIdleMs?: number
  /** The current time (ms since the epoch); default now. */
  now?: number
}

/** What a sweep did. */
export interface SweepReport {
  /** Keys whose images were released (unmounted, file deleted). */
  released: string[]
  /** Keys kept: still wanted, or locked by a builder. */
  kept: string[]
  /** Entries of an image's name left alone because they are not what that name should be. */
  ignored: string[]
}

/** The lstat of a path, or null when nothing is there. */
export function entryAt(path: string): Stats | null {
  try {
    return lstatSync(path)
  } catch {
    return null
  }
}

/** Whether `path` is a mount point in this process's mount namespace. */
export function isMountPoint(path: string): boolean {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
  // mountinfo writes a space, tab, newline or backslash in a path as a three-digit octal escape.
  const decoded = (field: string): string =>
    field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)))
  return mounts.split('\n').some((line) => decoded(line.split(' ')[4] ?? '') === path)
}

/**
 * `umount -l -c path`; true when it succeeded. A child process the event loop waits on, not a
 * synchronous one: a sweep runs inside a live runner, whose sockets must not stall on umount.
 */
function unmountLazily(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn('umount', ['-l', '-c', path], { stdio: 'ignore' })
    child.once('error', () => resolve(false))
    child.once('exit', (code) => resolve(code === 0))
  })
}

/** Lazily unmounts every mount stacked on the directory `path` (never through a symlink). */
export async function unmountAll(path: string): Promise<void> {
  for (let i = 0; i < 16 && entryAt(path)?.isDirectory() && isMountPoint(path); i++) {
    if (!(await unmountLazily(path))) return
  }
}

/** Removes `path` when it is an empty directory (never a symlink's target). */
function removeDir(path: string): void {
  if (!entryAt(path)?.isDirectory()) return
  try {
    rmdirSync(path)
  } catch {}
}

/** Unlinks `path` when it is a regular file; true when something of another kind is there. */
function removeFile(path: string): boolean {
  const entry = entryAt(path)
  if (!entry) return false
  if (!entry.isFile()) return true
  try {
    unlinkSync(path)
  } catch {}
  return false
}

/** Takes the key's lock dir, or a stale one over; false while a live builder or sweeper holds it. */
export function tryLock(lock: string, now = Date.now()): boolean {
  try {
    mkdirSync(lock)
    return true
  } catch {}
  const held = entryAt(lock)
  if (!held?.isDirectory() || now - held.mtimeMs < LOCK_STALE_MS) return false
  // The holder crashed: its lock dir is taken over in place, a fresh mtime marking the new holder.
  removeDir(lock)
  try {
    mkdirSync(lock)
    return true
  } catch {
    return false
  }
}

/** Releases the key's image under its lock; see the header for the steps. */
async function releaseKey(
  cacheDir: string,
  key: string,
  options: Required<SweepOptions>,
  report: SweepReport,
): Promise<void> {
  const at = (suffix: string): string => join(cacheDir, `${key}${suffix}`)
  const lock = at('.lock')
  if (!tryLock(lock)) {
    report.kept.push(key)
    return
  }
  try {
    const used = entryAt(at('.used'))
    const sweeping = entryAt(at('.used.sweeping'))
    const image = entryAt(at('.img'))
    const young = (entry: Stats, idle: number): boolean => options.now - entry.mtimeMs < idle
    if (used?.isFile()) {
      renameSync(at('.used'), at('.used.sweeping'))
      const stamp = entryAt(at('.used.sweeping'))
      if (stamp && young(stamp, options.idleMs)) {
        renameSync(at('.used.sweeping'), at('.used'))
        report.kept.push(key)
        return
      }
    } else if (used) {
      report.ignored.push(`${key}.used`)
      report.kept.push(key)
      return
    } else if (!sweeping && image?.isFile() && young(image, options.legacyIdleMs)) {
      report.kept.push(key)
      return
    }
    // A builder that crashed left its staging mount and temp file; nobody builds while we hold the lock.
    await unmountAll(at('.staging'))
    removeDir(at('.staging'))
    for (const name of readdirSync(cacheDir)) {
      if (name.startsWith(`${key}.img.`) && ENTRY.test(name) && removeFile(join(cacheDir, name)))
        report.ignored.push(name)
    }
    await unmountAll(at(''))
    if (isMountPoint(at(''))) {
      // umount refused: the image stays whole, to be tried again by the next sweep.
      if (entryAt(at('.used.sweeping'))?.isFile()) renameSync(at('.used.sweeping'), at('.used'))
      report.kept.push(key)
      return
    }
    if (entryAt(at(''))?.isSymbolicLink()) report.ignored.push(key)
    removeDir(at(''))
    if (removeFile(at('.img'))) report.ignored.push(`${key}.img`)
    if (removeFile(at('.used.sweeping'))) report.ignored.push(`${key}.used.sweeping`)
    report.released.push(key)
  } finally {
    removeDir(lock)
  }
}

/**
 * Releases every image in `cacheDir` no runner wants: unmounted lazily (live sandboxes keep
 * theirs), its loop device freed with its last mount, its file deleted. Keys another process
 * holds locked are kept for a later sweep; `keep` keys are never looked at.
 */
export async function sweepRuntimeImages(
  cacheDir: string,
  options: SweepOptions = {},
  keep: string[] = [],
): Promise<SweepReport> {
  const resolved: Required<SweepOptions> = {
    idleMs: options.idleMs ?? IMAGE_IDLE_MS,
    legacyIdleMs: options.legacyIdleMs ?? LEGACY_IDLE_MS,
    now: options.now ?? Date.now(),
  }
  const report: SweepReport = { released: [], kept: [], ignored: [] }
  if (!entryAt(cacheDir)?.isDirectory()) return report
  const keys = new Set<string>()
  for (const name of readdirSync(cacheDir)) {
    const key = ENTRY.exec(name)?.[1]
    if (key && !keep.includes(key)) keys.add(key)
  }
  for (const key of [...keys].sort()) {
    try {
      await releaseKey(cacheDir, key, resolved, report)
    } catch {
      report.kept.push(key)
    }
  }
  return report
}
