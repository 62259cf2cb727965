// A sandbox's disk: a sparse ext4 image of the sandbox's `diskBytes`, loop-mounted (nodev,
// nosuid) at `<sandbox dir>/disk`. It holds `workspace/`, owned by the sandbox user and bound
// at /workspace, and `etc/`, the generated /etc files bound read-only. A full workspace gets
// ENOSPC inside the sandbox and costs the host no more than the limit. Because the sandbox's
// binds come from this filesystem, /proc/self/mountinfo inside names paths of the image
// (`/workspace`), not the runner's state dir. The mount outlives a runner restart; destroy
// unmounts it and deletes the image.
//
// Formatting takes 10-20 ms, on the path of every cold create. So the namespace driver keeps one
// spare: an image of the size last asked for, formatted ahead of time in `<state dir>/disk-spares`
// (by the chain of the create before, at the lowest priority, after its own disk is mounted).
// A create of that size renames it into its folder and only mounts it; a spare is formatted into
// a temporary file and renamed into place, so it is complete or absent, and each is used once.
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  chownSync,
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs'
import { join } from 'node:path'
import { RunnerError } from '../runner-error.ts'
import { type DiskFormat, findBinary, type SpareRefill } from './sandbox-launch.ts'

/** Programs the disk needs, looked up in the system folders. */
const TOOLS = ['mkfs.ext4', 'mount', 'umount'] as const

/** Folders searched for the tools. */
const SBIN_DIRS = ['/usr/sbin', '/sbin', '/usr/bin', '/bin']

/** Smallest disk that holds an ext4 journal and a usable workspace. */
export const MIN_DISK_BYTES = 64 * 1024 * 1024

/** Where a sandbox's disk lives. */
export interface WorkspaceDisk {
  /** The sparse image file. */
  image: string
  /** Where it is mounted. */
  mount: string
  /** The workspace folder on it. */
  workspace: string
  /** The generated /etc files' folder on it. */
  etc: string
}

function tool(name: (typeof TOOLS)[number]): string | null {
  for (const dir of SBIN_DIRS) if (existsSync(join(dir, name))) return join(dir, name)
  return null
}

/** Why disk limits cannot be enforced here, or null when they can. */
export function diskProblem(): string | null {
  if (process.getuid?.() !== 0) return 'a disk limit needs a runner running as root (it loop-mounts an image)'
  for (const name of TOOLS) {
    if (!tool(name)) return `${name} is not installed; install e2fsprogs and mount (util-linux)`
  }
  if (!existsSync('/dev/loop-control'))
    return '/dev/loop-control is missing, so no loop device can be attached'
  return null
}

/**
 * Runs one of the tools without blocking the runner: formatting, mounting and unmounting take
 * tens of milliseconds, during which every other client's traffic would wait.
 */
function run(name: (typeof TOOLS)[number], args: string[]): Promise<void> {
  const path = tool(name)
  const failed = (detail: string): RunnerError =>
    new RunnerError('AGENT_UNAVAILABLE', `${name} ${args.join(' ')} failed: ${detail}`)
  if (!path) return Promise.reject(failed('not found'))
  return new Promise((resolve, reject) => {
    const child = spawn(path, args, { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
    })
    child.once('error', (error) => reject(failed(error.message)))
    child.once('close', (code) => (code === 0 ? resolve() : reject(failed(stderr.trim() || `exit ${code}`))))
  })
}

/** The disk's paths for a sandbox folder. */
export function diskPaths(dir: string): WorkspaceDisk {
  const mount = join(dir, 'disk')
  return { image: join(dir, 'disk.img'), mount, workspace: join(mount, 'workspace'), etc: join(mount, 'etc') }
}

/** A sparse file of `bytes`, readable and writable by root alone. */
function sparseFile(path: string, bytes: number): void {
  const fd = openSync(path, 'w', 0o600)
  try {
    ftruncateSync(fd, bytes)
  } finally {
    closeSync(fd)
  }
}

/** A disk's image, sized (sparse), and its mount folder: what is made before it is formatted. */
export function prepareDisk(dir: string, bytes: number): WorkspaceDisk {
  const disk = diskPaths(dir)
  sparseFile(disk.image, bytes)
  mkdirSync(disk.mount, { recursive: true, mode: 0o700 })
  return disk
}

/** A temporary spare older than this is left from a runner that died while formatting it. */
const STALE_SPARE_MS = 60_000

/** The formatted spare of `bytes` in `sparesDir`. */
function sparePath(sparesDir: string, bytes: number): string {
  return join(sparesDir, `${bytes}.img`)
}

/**
 * Moves the formatted spare of `bytes` (if there is one) into `dir` as its disk image, with the
 * mount folder made; null when there is none, and the disk is to be formatted.
 */
export function takeSpareDisk(sparesDir: string, dir: string, bytes: number): WorkspaceDisk | null {
  const disk = diskPaths(dir)
  try {
    renameSync(sparePath(sparesDir, bytes), disk.image)
  } catch {
    return null
  }
  mkdirSync(disk.mount, { recursive: true, mode: 0o700 })
  return disk
}

/**
 * The next spare of `bytes` for a chain to format: a sized temporary file in `sparesDir` and the
 * spare's path. Spares of other sizes, and temporary files a dead runner left, are deleted: one
 * spare is kept, of the size last asked for. Null when nice or mv is missing.
 */
export function spareRefill(sparesDir: string, bytes: number): SpareRefill | null {
  const nice = findBinary('nice')
  const mv = findBinary('mv')
  if (!nice || !mv) return null
  mkdirSync(sparesDir, { recursive: true, mode: 0o700 })
  const now = Date.now()
  for (const name of readdirSync(sparesDir)) {
    const path = join(sparesDir, name)
    try {
      if (name.endsWith('.img') ? name !== `${bytes}.img` : now - statSync(path).mtimeMs > STALE_SPARE_MS)
        rmSync(path, { force: true })
    } catch {
      // gone meanwhile
    }
  }
  const tmp = join(sparesDir, `${bytes}.${randomBytes(6).toString('hex')}.tmp`)
  sparseFile(tmp, bytes)
  return { nice, mv, tmp, spare: sparePath(sparesDir, bytes) }
}

/**
 * How a sandbox's first process formats (unless `formatted`) and mounts a prepared disk itself,
 * then formats `refill` (see `chainArgs`).
 */
export function diskFormat(
  disk: WorkspaceDisk,
  formatted = false,
  refill: SpareRefill | null = null,
): DiskFormat {
  const mkfs = tool('mkfs.ext4')
  const mount = tool('mount')
  const umount = tool('umount')
  if (!mkfs || !mount || !umount)
    throw new RunnerError('AGENT_UNAVAILABLE', `cannot format a disk: ${diskProblem()}`)
  return {
    mkfs,
    mountTool: mount,
    umountTool: umount,
    image: disk.image,
    mount: disk.mount,
    formatted,
    refill,
  }
}

/** Makes the workspace (owned by `uid`) and the /etc folder on a mounted disk. */
export function finishDisk(disk: WorkspaceDisk, uid: number): WorkspaceDisk {
  mkdirSync(disk.workspace, { mode: 0o755 })
  chownSync(disk.workspace, uid, uid)
  mkdirSync(disk.etc, { mode: 0o755 })
  return disk
}

/** Creates, formats and mounts a `bytes` disk in `dir`, with the workspace owned by `uid`. */
export async function createDisk(dir: string, bytes: number, uid: number): Promise<WorkspaceDisk> {
  const disk = prepareDisk(dir, bytes)
  // No reserved blocks: the whole limit is the sandbox's. Lazy init keeps formatting at ~50 ms.
  await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', 'lazy_itable_init=1,lazy_journal_init=1', disk.image])
  await run('mount', ['-o', 'loop,nodev,nosuid', disk.image, disk.mount])
  return finishDisk(disk, uid)
}

/** True when something is mounted at `path`. */
function mounted(path: string): boolean {
  return spawnSync('mountpoint', ['-q', path]).status === 0
}

/** Unmounts the disk (lazily when still busy) and deletes the image. */
export async function removeDisk(dir: string): Promise<void> {
  const disk = diskPaths(dir)
  if (existsSync(disk.mount) && mounted(disk.mount)) {
    try {
      await run('umount', [disk.mount])
    } catch {
      await run('umount', ['-l', disk.mount])
    }
  }
  rmSync(disk.image, { force: true })
}
