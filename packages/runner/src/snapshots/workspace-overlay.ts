// A fork's workspace as an overlay: the snapshot's shared read-only tree (lower-layers.ts)
// below, the fork's own upper and work folders above, mounted at the host folder the driver
// binds into the sandbox, so a restore costs one mount instead of a copy.
//
// Model: the fork's overlay folder is `overlay/` beside its workspace (on its own disk when
// it has a disk limit, so a full upper layer is ENOSPC inside and costs the host no more than
// the limit). It holds `upper/`, `work/`, `lower` (a symlink to the shared tree) and
// `lease.json` (the tree and the user file that counts this fork). The mount is made with
// that folder as the working directory and relative option values, so the options that
// mountinfo shows inside the sandbox (`lowerdir=lower,upperdir=upper,workdir=work`) name no
// host path. Features that let an upper layer point into the lower one elsewhere are off
// (`redirect_dir`, `metacopy`, `index`): what the sandbox writes lands in its upper layer
// as whole files and directories, and a path absent from the upper layer shows the lower
// tree's file at the same path. Only sandbox code writes the upper layer, so the runner
// reads it (snapshots of forks) without following any link, like any workspace.
import { spawn } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import { RunnerError } from '../runner-error.ts'
import { type LowerLease, releaseLower } from './lower-layers.ts'

/** What `lease.json` records of a mounted fork. */
interface OverlayLease {
  snapshotId: string
  tree: string
  userFile: string
}

/** A fork's overlay folders. */
export interface WorkspaceOverlay {
  /** The snapshot whose tree is the lower layer. */
  snapshotId: string
  /** The fork's upper layer (what it changed). */
  upper: string
  /** The shared lower tree. */
  tree: string
}

/** Mount options besides the layers: nothing that lets the upper layer refer into the lower one. */
const OPTIONS = 'redirect_dir=off,metacopy=off,index=off,xino=off'

/** The overlay folder of the workspace at `workspace`. */
export function overlayDirOf(workspace: string): string {
  return join(dirname(workspace), 'overlay')
}

/** Why overlays cannot be mounted here, or null when they can. */
export function overlayProblem(): string | null {
  if (process.getuid?.() !== 0) {
    return 'the runner is not root, and bubblewrap cannot mount an overlay inside its user namespace'
  }
  try {
    if (!/\toverlay\n/.test(readFileSync('/proc/filesystems', 'utf8'))) return 'the kernel has no overlayfs'
  } catch {
    return '/proc/filesystems is unreadable'
  }
  if (!existsSync('/usr/bin/mount') && !existsSync('/bin/mount')) return 'mount (util-linux) is not installed'
  return null
}

/**
 * Mounts the overlay of `lease.tree` at the (empty) `workspace`, its upper layer owned and
 * moded like `workspace`; the lease is recorded so that `releaseWorkspaceOverlay` gives it back.
 */
export async function mountWorkspaceOverlay(
  workspace: string,
  snapshotId: string,
  lease: LowerLease,
): Promise<void> {
  const dir = overlayDirOf(workspace)
  const root = statSync(workspace)
  mkdirSync(dir, { mode: 0o700 })
  mkdirSync(join(dir, 'upper'), { mode: 0o700 })
  mkdirSync(join(dir, 'work'), { mode: 0o700 })
  chownSync(join(dir, 'upper'), root.uid, root.gid)
  chmodSync(join(dir, 'upper'), root.mode & 0o7777)
  symlinkSync(lease.tree, join(dir, 'lower'))
  const record: OverlayLease = { snapshotId, tree: lease.tree, userFile: lease.userFile }
  writeFileSync(join(dir, 'lease.json'), JSON.stringify(record), { mode: 0o600 })
  await mount(dir, workspace)
}

/** The overlay under a workspace, or null when it is a plain folder. */
export function workspaceOverlay(workspace: string): WorkspaceOverlay | null {
  const lease = readLease(overlayDirOf(workspace))
  return (
    lease && { snapshotId: lease.snapshotId, upper: join(overlayDirOf(workspace), 'upper'), tree: lease.tree }
  )
}

/**
 * Mounts a fork's overlay again when it is not mounted (a host that lost its mounts while
 * the sandbox's record stayed); `rebuild` writes the lower tree back when it is gone too.
 */
export async function remountWorkspaceOverlay(
  workspace: string,
  rebuild: (overlay: WorkspaceOverlay) => Promise<void>,
): Promise<void> {
  const overlay = workspaceOverlay(workspace)
  if (overlay === null || isMountPoint(workspace)) return
  if (!existsSync(overlay.tree)) await rebuild(overlay)
  await mount(overlayDirOf(workspace), workspace)
}

/** Unmounts a fork's overlay (detached when still busy) and gives back its lower tree. A plain workspace is left alone. */
export async function releaseWorkspaceOverlay(workspace: string): Promise<void> {
  const dir = overlayDirOf(workspace)
  if (!isDirectory(dir)) return
  const lease = readLease(dir)
  if (isMountPoint(workspace)) {
    try {
      await run(['umount', workspace], dir)
    } catch {
      await run(['umount', '-l', workspace], dir)
    }
  }
  rmSync(join(dir, 'lease.json'), { force: true })
  if (lease !== null) releaseLower(lease.userFile)
}

function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory()
  } catch {
    return false
  }
}

function readLease(dir: string): OverlayLease | null {
  let text: string
  try {
    text = readFileSync(join(dir, 'lease.json'), 'utf8')
  } catch {
    return null
  }
  let lease: Partial<OverlayLease>
  try {
    lease = JSON.parse(text) as Partial<OverlayLease>
  } catch {
    return null
  }
  return typeof lease.snapshotId === 'string' &&
    typeof lease.tree === 'string' &&
    typeof lease.userFile === 'string'
    ? (lease as OverlayLease)
    : null
}

function mount(dir: string, workspace: string): Promise<void> {
  return run(
    [
      'mount',
      '-t',
      'overlay',
      'overlay',
      '-o',
      `lowerdir=lower,upperdir=upper,workdir=work,${OPTIONS}`,
      workspace,
    ],
    dir,
  )
}

/** Whether `path` is a mount point in the runner's mount namespace. */
export function isMountPoint(path: string): boolean {
  const escaped = path.replace(/[\\ \t\n]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`)
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[4] === escaped)
}

function run(argv: string[], cwd: string): Promise<void> {
  const [command, ...args] = argv as [string, ...string[]]
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
    })
    const failed = (detail: string): RunnerError =>
      new RunnerError('AGENT_UNAVAILABLE', `${argv.join(' ')} failed: ${detail}`)
    child.once('error', (error) => reject(failed(error.message)))
    child.once('close', (code) => (code === 0 ? resolve() : reject(failed(stderr.trim() || `exit ${code}`))))
  })
}
