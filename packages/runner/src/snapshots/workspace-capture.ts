// Reads a sandbox's workspace on the host into the content store, without ever following a
// link the sandbox made.
//
// Model: the walk holds an open fd for each directory on its path and reaches every child as
// `/proc/self/fd/<dir fd>/<name>` (the kernel resolves the fd, not a path, like openat), with
// O_NOFOLLOW: a symlink or a directory swapped for one mid-walk cannot lead out of the
// workspace. A file is read only if the fd it opened (O_NONBLOCK, so a FIFO swapped in cannot
// block) is the regular file lstat saw. Symlinks are kept as their target bytes; FIFOs,
// sockets and devices are listed as skipped. Files are cut into `CHUNK_BYTES` chunks, each an
// object of the content store, so memory stays bounded and unchanged chunks are stored once.
// A file whose inode, size and ctime match the previous snapshot of the same sandbox is not
// read again (ctime cannot be set back from inside). The logical size and entry count are
// capped before anything is read past them.
//
// A fork whose workspace is an overlay (workspace-overlay.ts) is walked in its merged view,
// which the kernel keeps true, beside its upper layer: a file the upper layer does not hold is
// the lower tree's file at the same path, so its chunks are the base snapshot's and it is not
// read. Only what the fork wrote is read and hashed. The upper layer is reached by directory
// fds with O_NOFOLLOW like the workspace, and only asked whether a name is there.
import {
  type BigIntStats,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readlinkSync,
} from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { RunnerError } from '../runner-error.ts'
import type { ContentStore } from './content-store.ts'
import type { WorkspaceEntry } from './snapshot-manifest.ts'

/** Bytes per content chunk. */
export const CHUNK_BYTES = 4 * 1024 * 1024
/** Deepest directory nesting a snapshot walks (each level holds one fd open). */
export const MAX_DEPTH = 256

/** What a previous snapshot knew of one file, to skip reading it when it did not change. */
export interface FileFingerprint {
  ino: bigint
  size: bigint
  ctimeNs: bigint
  chunks: string[]
}

/** Bounds and memory of one capture. */
export interface CaptureOptions {
  /** Most bytes of file content (sparse files count at their full size). */
  maxBytes: number
  /** Most entries. */
  maxEntries: number
  /** Fingerprints from this sandbox's previous snapshot, by path key. */
  previous: ReadonlyMap<string, FileFingerprint>
  /** The overlay a fork's workspace is: its upper layer and the files of the snapshot below it, by path key. */
  base?: { upper: string; files: ReadonlyMap<string, { size: number; chunks: string[] }> }
}

/** What a capture found. */
export interface CapturedWorkspace {
  entries: WorkspaceEntry[]
  bytes: number
  skipped: Array<{ path: string; reason: string }>
  addedBytes: number
  /** Fingerprints for the next snapshot of this sandbox. */
  fingerprints: Map<string, FileFingerprint>
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK

/** Reads the workspace at `root` (a host path the runner owns) into `store`. */
export async function captureWorkspace(
  root: string,
  store: ContentStore,
  options: CaptureOptions,
): Promise<CapturedWorkspace> {
  const out: Walk = {
    entries: [],
    bytes: 0,
    skipped: [],
    addedBytes: 0,
    fingerprints: new Map(),
    running: new Set(),
    dropped: new Set(),
    failure: null,
  }
  const rootFd = openSync(root, DIR_FLAGS)
  const upperFd = options.base === undefined ? null : openSync(options.base.upper, DIR_FLAGS)
  try {
    await walk({ fd: rootFd, upperFd }, [], store, options, out)
  } finally {
    await Promise.all(out.running)
    closeSync(rootFd)
    if (upperFd !== null) closeSync(upperFd)
  }
  return {
    entries: out.entries.filter((e) => e.type !== 'file' || !out.dropped.has(e)),
    bytes: out.bytes,
    skipped: out.skipped,
    addedBytes: out.addedBytes,
    fingerprints: out.fingerprints,
  }
}

type FileEntry = Extract<WorkspaceEntry, { type: 'file' }>

/** A capture in progress: what it found so far and the file reads still running. */
interface Walk extends CapturedWorkspace {
  running: Set<Promise<void>>
  /** File entries left out after all (the file changed while it was read). */
  dropped: Set<WorkspaceEntry>
  /** The first error of a file read; the walk stops with it. */
  failure: unknown
}

/** Files read at once: reads and compression run on libuv's threads. */
const PARALLEL_READS = 8

/** The key of a path in fingerprints: its components' base64, joined. */
export function pathKey(path: readonly string[]): string {
  return path.join('/')
}

function at(dirFd: number, name: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`/proc/self/fd/${dirFd}/`), name])
}

function shown(path: readonly string[]): string {
  return path.map((p) => Buffer.from(p, 'base64').toString('utf8')).join('/')
}

/** A directory being walked: its fd in the workspace, and in the upper layer (null when that holds no such directory). */
interface WalkDir {
  fd: number
  upperFd: number | null
}

async function walk(
  dir: WalkDir,
  dirPath: string[],
  store: ContentStore,
  options: CaptureOptions,
  out: Walk,
): Promise<void> {
  if (dirPath.length >= MAX_DEPTH) {
    throw new RunnerError(
      'BAD_REQUEST',
      `the workspace nests directories deeper than ${MAX_DEPTH} levels at ${shown(dirPath)}; flatten it before taking a snapshot.`,
    )
  }
  const names = readdirSync(at(dir.fd, Buffer.alloc(0)), { encoding: 'buffer' })
  names.sort(Buffer.compare)
  const pending: Array<Promise<void>> = []
  try {
    await walkNames(dir, dirPath, names, store, options, out, pending)
  } finally {
    await Promise.all(pending)
  }
  if (out.failure !== null) throw out.failure
}

async function walkNames(
  dir: WalkDir,
  dirPath: string[],
  names: Buffer[],
  store: ContentStore,
  options: CaptureOptions,
  out: Walk,
  pending: Array<Promise<void>>,
): Promise<void> {
  for (const name of names) {
    if (out.entries.length >= options.maxEntries) {
      throw new RunnerError(
        'SNAPSHOT_TOO_LARGE',
        `the workspace holds more than ${options.maxEntries} files, directories and links, the snapshot limit; delete some (build outputs, caches) or ask the operator to raise --max-snapshot-entries.`,
        { details: { limit: options.maxEntries } },
      )
    }
    const dirFd = dir.fd
    const path = [...dirPath, name.toString('base64')]
    const full = at(dirFd, name)
    let st: BigIntStats
    try {
      st = lstatSync(full, { bigint: true })
    } catch {
      continue // removed while the walk ran
    }
    const common = { path, mode: Number(st.mode) & 0o1777, mtimeMs: Number(st.mtimeNs) / 1e6 }
    if (st.isSymbolicLink()) {
      const target = readlinkSync(full, { encoding: 'buffer' })
      out.entries.push({ type: 'symlink', ...common, target: target.toString('base64') })
    } else if (st.isDirectory()) {
      let fd: number
      try {
        fd = openSync(full, DIR_FLAGS)
      } catch {
        out.skipped.push({ path: shown(path), reason: 'changed while read' })
        continue
      }
      const upperFd = dir.upperFd === null ? null : openOrNull(at(dir.upperFd, name))
      try {
        if (fstatSync(fd, { bigint: true }).ino !== st.ino) {
          out.skipped.push({ path: shown(path), reason: 'changed while read' })
          continue
        }
        out.entries.push({ type: 'dir', ...common })
        await walk({ fd, upperFd }, path, store, options, out)
      } finally {
        closeSync(fd)
        if (upperFd !== null) closeSync(upperFd)
      }
    } else if (st.isFile()) {
      out.bytes += Number(st.size)
      if (out.bytes > options.maxBytes) {
        throw new RunnerError(
          'SNAPSHOT_TOO_LARGE',
          `the workspace holds more than ${options.maxBytes} bytes of files (at ${shown(path)}; a sparse file counts at its full size), over the snapshot limit; delete large files or ask the operator to raise --max-snapshot-bytes.`,
          { details: { limit: options.maxBytes } },
        )
      }
      // The entry takes its place now; its chunks are filled in by a read that runs alongside
      // others (the directory's fd stays open until they end).
      const entry: FileEntry = { type: 'file', ...common, size: 0, chunks: [] }
      out.entries.push(entry)
      while (out.running.size >= PARALLEL_READS) await Promise.race(out.running)
      if (out.failure !== null) throw out.failure
      const below = options.base && !inUpper(dir.upperFd, name) ? lowerFile(path, st, store, options) : null
      const task = (below ? Promise.resolve(below) : captureFile(full, st, path, store, options, out)).then(
        (file) => {
          if (file === null) {
            out.dropped.add(entry)
            out.skipped.push({ path: shown(path), reason: 'changed while read' })
          } else {
            entry.size = file.size
            entry.chunks = file.chunks
          }
        },
        (error: unknown) => {
          out.failure ??= error
        },
      )
      out.running.add(task)
      pending.push(task)
      void task.finally(() => out.running.delete(task))
    } else {
      const reason = st.isFIFO() ? 'fifo' : st.isSocket() ? 'socket' : 'device'
      out.skipped.push({ path: shown(path), reason })
    }
  }
}

function openOrNull(path: Buffer): number | null {
  try {
    return openSync(path, DIR_FLAGS)
  } catch {
    return null
  }
}

/** Whether the upper layer holds `name` in the directory `upperFd` (null: it has no such directory). */
function inUpper(upperFd: number | null, name: Buffer): boolean {
  if (upperFd === null) return false
  try {
    lstatSync(at(upperFd, name))
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ENOENT'
  }
}

/** A file the fork did not write: the base snapshot's chunks, when it has them at this size. */
function lowerFile(
  path: readonly string[],
  st: BigIntStats,
  store: ContentStore,
  options: CaptureOptions,
): { chunks: string[]; size: number } | null {
  const known = options.base?.files.get(pathKey(path))
  if (known === undefined || BigInt(known.size) !== st.size) return null
  if (!known.chunks.every((hash) => store.encodingOf(hash) !== null)) return null
  return { chunks: known.chunks, size: known.size }
}

async function captureFile(
  full: Buffer,
  st: BigIntStats,
  path: string[],
  store: ContentStore,
  options: CaptureOptions,
  out: Walk,
): Promise<{ chunks: string[]; size: number } | null> {
  const key = pathKey(path)
  const known = options.previous.get(key)
  if (
    known !== undefined &&
    known.ino === st.ino &&
    known.size === st.size &&
    known.ctimeNs === st.ctimeNs &&
    known.chunks.every((hash) => store.encodingOf(hash) !== null)
  ) {
    out.fingerprints.set(key, known)
    return { chunks: known.chunks, size: Number(known.size) }
  }
  let handle: FileHandle
  try {
    handle = await open(full, FILE_FLAGS)
  } catch {
    return null
  }
  try {
    const opened = await handle.stat({ bigint: true })
    if (!opened.isFile() || opened.ino !== st.ino) return null
    // Read up to the size lstat saw: a file that grows meanwhile cannot make the read endless.
    const chunks: string[] = []
    const size = Number(st.size)
    let position = 0
    while (position < size) {
      // A buffer of its own per chunk: the store keeps or hashes it while the next is read.
      const want = Math.min(CHUNK_BYTES, size - position)
      const buffer = Buffer.allocUnsafe(want)
      let filled = 0
      while (filled < want) {
        const { bytesRead: n } = await handle.read(buffer, filled, want - filled, position + filled)
        if (n === 0) break
        filled += n
      }
      if (filled === 0) break
      const stored = await store.put(filled === want ? buffer : buffer.subarray(0, filled))
      chunks.push(stored.hash)
      out.addedBytes += stored.addedBytes
      position += filled
      if (filled < want) break
    }
    out.fingerprints.set(key, { ino: st.ino, size: BigInt(position), ctimeNs: opened.ctimeNs, chunks })
    return { chunks, size: position }
  } finally {
    await handle.close()
  }
}
