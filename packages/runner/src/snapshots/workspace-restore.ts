// Writes a snapshot's workspace entries into a fresh sandbox's workspace on the host.
//
// Model: the entries came from a sandbox, so every name is checked (no `/`, NUL, `.` or `..`,
// not empty) and each entry must sit in the directory the previous entries opened (parents
// come first). Every entry is made relative to an open directory fd, through
// `/proc/self/fd/<fd>/<name>`, with O_EXCL and O_NOFOLLOW: nothing is written through a
// symlink, not even one this restore made a moment earlier, and nothing outside the
// workspace is touched. Files get the workspace root's owner, their mode (never setuid or
// setgid) and their mtime; a raw object is cloned with a reflink where the filesystem can.
import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  futimesSync,
  lchownSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  symlinkSync,
} from 'node:fs'
import { copyFile, open } from 'node:fs/promises'
import { RunnerError } from '../runner-error.ts'
import type { ContentStore } from './content-store.ts'
import type { WorkspaceEntry } from './snapshot-manifest.ts'
import { MAX_DEPTH } from './workspace-capture.ts'

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
const NEW_FILE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW

interface OpenDir {
  fd: number
  path: string[]
  mode: number
  mtimeMs: number
  /** File writes in this directory still running; the directory closes after them. */
  pending: Array<Promise<void>>
}

/** File writes at once: the copies and decompressions run on libuv's threads. */
const PARALLEL_WRITES = 8

/**
 * Writes `entries` under the (empty) workspace at `root`, owned like `root`. With `linkFrom`
 * (writing a lower tree, lower-layers.ts), a file it names is hard-linked from there instead
 * of written, when that is a regular file with the entry's owner, size, mode and mtime.
 */
export async function restoreWorkspace(
  root: string,
  entries: readonly WorkspaceEntry[],
  store: ContentStore,
  linkFrom?: (entry: Extract<WorkspaceEntry, { type: 'file' }>) => Buffer | null,
): Promise<void> {
  const rootFd = openSync(root, DIR_FLAGS)
  const owner = fstatSync(rootFd)
  const stack: OpenDir[] = [{ fd: rootFd, path: [], mode: -1, mtimeMs: 0, pending: [] }]
  const running = new Set<Promise<void>>()
  let failure: unknown = null
  const fail = (entry: WorkspaceEntry, error: unknown): RunnerError => {
    if (error instanceof RunnerError) return error
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOSPC' || code === 'EDQUOT') {
      return new RunnerError(
        'SNAPSHOT_TOO_LARGE',
        `the snapshot's workspace does not fit the new sandbox's disk (it ran out at ${shown(entry.path)}); create the sandbox with a larger limits.diskBytes.`,
      )
    }
    return bad(`${shown(entry.path)}: ${code ?? String(error)}`)
  }
  try {
    for (const entry of entries) {
      if (failure !== null) throw failure
      const name = checkedName(entry.path)
      const parentPath = entry.path.slice(0, -1)
      while (stack.length > 1 && !isPrefix(stack.at(-1)!.path, parentPath)) await closeDir(stack.pop()!)
      const parent = stack.at(-1)!
      if (parent.path.length !== parentPath.length) {
        throw bad(`entry ${shown(entry.path)} comes before its directory`)
      }
      const full = Buffer.concat([Buffer.from(`/proc/self/fd/${parent.fd}/`), name])
      const mode = entry.mode & 0o1777
      try {
        if (entry.type === 'dir') {
          if (stack.length > MAX_DEPTH) throw bad(`directories nest deeper than ${MAX_DEPTH} levels`)
          mkdirSync(full, { mode: 0o700 })
          const fd = openSync(full, DIR_FLAGS)
          fchownSync(fd, owner.uid, owner.gid)
          stack.push({ fd, path: entry.path, mode, mtimeMs: entry.mtimeMs, pending: [] })
        } else if (entry.type === 'symlink') {
          symlinkSync(Buffer.from(entry.target, 'base64'), full)
          lchownSync(full, owner.uid, owner.gid)
          lutimesSync(full, entry.mtimeMs / 1000, entry.mtimeMs / 1000)
        } else if (!linked(linkFrom?.(entry) ?? null, full, entry, owner.uid)) {
          while (running.size >= PARALLEL_WRITES) await Promise.race(running)
          const task = writeFile(full, entry, store, owner).catch((error: unknown) => {
            failure ??= fail(entry, error)
          })
          running.add(task)
          parent.pending.push(task)
          void task.finally(() => running.delete(task))
        }
      } catch (error) {
        throw fail(entry, error)
      }
    }
    await Promise.all(running)
    if (failure !== null) throw failure
  } finally {
    await Promise.all(running)
    while (stack.length > 1) await closeDir(stack.pop()!)
    closeSync(rootFd)
  }
}

/** Writes one file (the name must not exist) and gives it its owner, mode and mtime. */
async function writeFile(
  full: Buffer,
  entry: Extract<WorkspaceEntry, { type: 'file' }>,
  store: ContentStore,
  owner: { uid: number; gid: number },
): Promise<void> {
  const only = entry.chunks.length === 1 ? store.rawPath(entry.chunks[0]!) : null
  if (only !== null) {
    // COPYFILE_EXCL makes the kernel refuse an existing name (a symlink included).
    await copyFile(only, full, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE)
  } else {
    const handle = await open(full, NEW_FILE_FLAGS, 0o600)
    try {
      for (const hash of entry.chunks) await handle.write(await store.read(hash))
    } finally {
      await handle.close()
    }
  }
  const handle = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW)
  try {
    await handle.chown(owner.uid, owner.gid)
    await handle.chmod(entry.mode & 0o1777)
    await handle.utimes(entry.mtimeMs / 1000, entry.mtimeMs / 1000)
  } finally {
    await handle.close()
  }
}

/** Hard-links `from` (never following a link there) as `full` when it is the entry's file; false when not. */
function linked(
  from: Buffer | null,
  full: Buffer,
  entry: Extract<WorkspaceEntry, { type: 'file' }>,
  uid: number,
): boolean {
  if (from === null) return false
  try {
    const st = lstatSync(from)
    if (
      !st.isFile() ||
      st.uid !== uid ||
      st.size !== entry.size ||
      (st.mode & 0o1777) !== (entry.mode & 0o1777) ||
      Math.abs(st.mtimeMs - entry.mtimeMs) >= 1
    ) {
      return false
    }
    linkSync(from, full)
    return true
  } catch {
    return false
  }
}

async function closeDir(dir: OpenDir): Promise<void> {
  await Promise.all(dir.pending)
  try {
    fchmodSync(dir.fd, dir.mode)
    futimesSync(dir.fd, dir.mtimeMs / 1000, dir.mtimeMs / 1000)
  } finally {
    closeSync(dir.fd)
  }
}

function checkedName(path: readonly string[]): Buffer {
  for (const part of path) {
    const bytes = Buffer.from(part, 'base64')
    if (
      bytes.length === 0 ||
      bytes.length > 255 ||
      bytes.toString('base64') !== part ||
      bytes.includes(0x2f) ||
      bytes.includes(0) ||
      (bytes.length <= 2 && /^\.\.?$/.test(bytes.toString('latin1')))
    ) {
      throw bad(`a name in ${shown(path)} is not a plain file name`)
    }
  }
  return Buffer.from(path.at(-1)!, 'base64')
}

function isPrefix(prefix: readonly string[], path: readonly string[]): boolean {
  return prefix.length <= path.length && prefix.every((p, i) => p === path[i])
}

function shown(path: readonly string[]): string {
  return path.map((p) => Buffer.from(p, 'base64').toString('utf8')).join('/')
}

function bad(what: string): RunnerError {
  return new RunnerError(
    'SNAPSHOT_INCOMPATIBLE',
    `the snapshot's workspace is damaged (${what}); take a new snapshot or delete this one.`,
  )
}
