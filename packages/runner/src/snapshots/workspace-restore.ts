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
  copyFileSync,
  fchmodSync,
  fchownSync,
  fstatSync,
  futimesSync,
  lchownSync,
  lutimesSync,
  mkdirSync,
  openSync,
  symlinkSync,
  writeSync,
} from 'node:fs'
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
}

/** Writes `entries` under the (empty) workspace at `root`, owned like `root`. */
export async function restoreWorkspace(
  root: string,
  entries: readonly WorkspaceEntry[],
  store: ContentStore,
): Promise<void> {
  const rootFd = openSync(root, DIR_FLAGS)
  const owner = fstatSync(rootFd)
  const stack: OpenDir[] = [{ fd: rootFd, path: [], mode: -1, mtimeMs: 0 }]
  try {
    for (const entry of entries) {
      const name = checkedName(entry.path)
      const parentPath = entry.path.slice(0, -1)
      while (stack.length > 1 && !isPrefix(stack.at(-1)!.path, parentPath)) closeDir(stack.pop()!)
      const parent = stack.at(-1)!
      if (parent.path.length !== parentPath.length) {
        throw bad(`entry ${shown(entry.path)} comes before its directory`)
      }
      const full = Buffer.concat([Buffer.from(`/proc/self/fd/${parent.fd}/`), name])
      try {
        await restoreEntry(entry, full, stack, owner)
      } catch (error) {
        if (error instanceof RunnerError) throw error
        throw bad(`${shown(entry.path)}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`)
      }
    }
  } finally {
    while (stack.length > 1) closeDir(stack.pop()!)
    closeSync(rootFd)
  }

  async function restoreEntry(
    entry: WorkspaceEntry,
    full: Buffer,
    stack: OpenDir[],
    owner: { uid: number; gid: number },
  ): Promise<void> {
    {
      const mode = entry.mode & 0o1777
      if (entry.type === 'dir') {
        if (stack.length > MAX_DEPTH) throw bad(`directories nest deeper than ${MAX_DEPTH} levels`)
        mkdirSync(full, { mode: 0o700 })
        const fd = openSync(full, DIR_FLAGS)
        fchownSync(fd, owner.uid, owner.gid)
        stack.push({ fd, path: entry.path, mode, mtimeMs: entry.mtimeMs })
      } else if (entry.type === 'symlink') {
        symlinkSync(Buffer.from(entry.target, 'base64'), full)
        lchownSync(full, owner.uid, owner.gid)
        lutimesSync(full, entry.mtimeMs / 1000, entry.mtimeMs / 1000)
      } else {
        await writeFile(full, entry, store)
        const fd = openSync(full, constants.O_RDONLY | constants.O_NOFOLLOW)
        try {
          fchownSync(fd, owner.uid, owner.gid)
          fchmodSync(fd, mode)
          futimesSync(fd, entry.mtimeMs / 1000, entry.mtimeMs / 1000)
        } finally {
          closeSync(fd)
        }
      }
    }
  }
}

async function writeFile(
  full: Buffer,
  entry: Extract<WorkspaceEntry, { type: 'file' }>,
  store: ContentStore,
): Promise<void> {
  const only = entry.chunks.length === 1 ? store.rawPath(entry.chunks[0]!) : null
  if (only !== null) {
    // COPYFILE_EXCL makes the kernel refuse an existing name (a symlink included).
    copyFileSync(only, full, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE)
    return
  }
  const fd = openSync(full, NEW_FILE_FLAGS, 0o600)
  try {
    for (const hash of entry.chunks) {
      const bytes = await store.read(hash)
      let at = 0
      while (at < bytes.length) at += writeSync(fd, bytes, at, bytes.length - at)
    }
  } finally {
    closeSync(fd)
  }
}

function closeDir(dir: OpenDir): void {
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
