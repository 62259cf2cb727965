// File operations on a sandbox's workspace, every path confined by `WorkspaceWalker`.
//
// Model: each operation walks to its final component through held directory fds and acts on
// that component through its directory's fd, never through a path string that could be
// re-resolved. A symlink is followed only where its whole resolution stays in the workspace:
// read, write, list and `mkdir -p` follow one in the final component; stat, remove and rename
// act on the link itself. Reads and writes stream through the fd they opened, so a large file
// never sits in memory whole and a swap mid-transfer cannot redirect it. Only regular files are
// read or written (a FIFO would hang the agent). OS errors become typed agent errors
// (FILE_NOT_FOUND, IS_A_DIRECTORY, ...) whose messages name the path.
import { fchownSync, constants as fsc, fstatSync, type ReadStream, type Stats } from 'node:fs'
import { type FileHandle, lstat, mkdir, open, readdir, rename, rmdir, unlink } from 'node:fs/promises'
import type { ErrorCode, FileInfo } from '@conch/protocol'
import { AgentError } from './agent-error.ts'
import { removeTreeAt } from './remove-tree-at.ts'
import type { WorkspacePaths } from './workspace-paths.ts'
import { at, DIR_FLAGS, errnoOf, type FinalStep, followIfLink, WorkspaceWalker } from './workspace-walker.ts'

/** The code and the message tail for each OS error the API expects. */
const ERRNO_ERRORS: Record<string, [ErrorCode, string]> = {
  ENOENT: ['FILE_NOT_FOUND', 'does not exist; check the path (list its directory to see what is there)'],
  ENOTDIR: ['NOT_A_DIRECTORY', 'has a file where a directory was expected'],
  EISDIR: ['IS_A_DIRECTORY', 'is a directory'],
  EEXIST: ['FILE_EXISTS', 'already exists'],
  ENOTEMPTY: ['DIRECTORY_NOT_EMPTY', 'is a directory that is not empty; pass recursive: true'],
  EACCES: ['FORBIDDEN', 'is not accessible to the agent (permission denied)'],
  EPERM: ['FORBIDDEN', 'is not accessible to the agent (permission denied)'],
  EROFS: ['FORBIDDEN', 'is on a read-only filesystem'],
  EINVAL: ['BAD_REQUEST', 'cannot be moved there (a directory cannot move into itself)'],
  ENAMETOOLONG: ['BAD_REQUEST', 'has a name longer than the filesystem allows (255 bytes a component)'],
}

/** Opens a final file without following a symlink, and without blocking on a FIFO. */
const FILE_NOFOLLOW = fsc.O_NOFOLLOW | fsc.O_NONBLOCK

/** Who owns what the files API creates. */
export interface WorkspaceFilesOptions {
  /** Every file and directory the API creates is chowned to this user (the sandbox user when the agent runs as root). */
  owner?: { uid: number; gid: number }
}

/** File operations confined to one workspace. */
export class WorkspaceFiles {
  readonly #paths: WorkspacePaths
  readonly #walker: WorkspaceWalker
  readonly #owner: { uid: number; gid: number } | undefined

  /** Operates inside `paths`' root. */
  constructor(paths: WorkspacePaths, options: WorkspaceFilesOptions = {}) {
    this.#paths = paths
    this.#walker = new WorkspaceWalker(paths.realRoot, [paths.root])
    this.#owner = options.owner
  }

  /** Metadata of a path; symlinks are reported as symlinks, not followed. */
  async stat(path: string): Promise<FileInfo> {
    const parts = this.#paths.components(path)
    return this.#walk(path, parts, async (dir, name) =>
      this.#info(parts, name === '' ? fstatSync(dir) : await lstat(at(dir, name))),
    )
  }

  /** The entries of a directory, sorted by name. */
  async list(path: string): Promise<FileInfo[]> {
    const parts = this.#paths.components(path)
    return this.#walk(path, parts, async (dir, name) => {
      if (name === '') return this.#entries(dir, parts)
      let opened: FileHandle
      try {
        opened = await open(at(dir, name), DIR_FLAGS)
      } catch (err) {
        return followIfLink(dir, name, err)
      }
      try {
        return await this.#entries(opened.fd, parts)
      } finally {
        await opened.close()
      }
    })
  }

  /** Opens a file for streaming; the stream ends at the file's end. */
  async read(path: string): Promise<{ info: FileInfo; stream: ReadStream }> {
    const parts = this.#paths.components(path)
    return this.#walk(path, parts, async (dir, name) => {
      if (name === '') throw isDirectory(path)
      let file: FileHandle
      try {
        file = await open(at(dir, name), fsc.O_RDONLY | FILE_NOFOLLOW)
      } catch (err) {
        return followIfLink(dir, name, err)
      }
      try {
        const s = await this.#regular(file, path)
        return { info: this.#info(parts, s), stream: file.createReadStream() }
      } catch (err) {
        await file.close()
        throw err
      }
    })
  }

  /** Writes a file from a stream of chunks, creating missing parent directories. */
  async write(path: string, chunks: AsyncIterable<Uint8Array>, mode?: number): Promise<FileInfo> {
    const parts = this.#paths.components(path)
    const hint = 'write to a file path inside it'
    if (parts.length === 0) throw isDirectory(path, hint)
    return this.#walk(
      path,
      parts,
      async (dir, name) => {
        if (name === '') throw isDirectory(path, hint)
        let file: FileHandle
        let created = true
        try {
          file = await open(
            at(dir, name),
            fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | FILE_NOFOLLOW,
            mode ?? 0o666,
          )
        } catch (err) {
          if (errnoOf(err) !== 'EEXIST') throw err
          created = false
          try {
            file = await open(at(dir, name), fsc.O_WRONLY | FILE_NOFOLLOW)
          } catch (err) {
            // A FIFO with no reader refuses a non-blocking writer.
            if (errnoOf(err) === 'ENXIO') throw notRegular(path)
            return followIfLink(dir, name, err)
          }
        }
        try {
          if (created) this.#chown(file.fd)
          else {
            await this.#regular(file, path)
            await file.truncate(0)
          }
          await writeAll(file, chunks)
          return this.#info(parts, await file.stat())
        } finally {
          await file.close()
        }
      },
      true,
    )
  }

  /** Creates a directory (and its parents with `recursive`, which accepts one that exists). */
  async mkdir(path: string, recursive = false): Promise<FileInfo> {
    const parts = this.#paths.components(path)
    return this.#walk(
      path,
      parts,
      async (dir, name) => {
        if (name === '') {
          if (recursive) return this.#info(parts, fstatSync(dir))
          throw new AgentError('FILE_EXISTS', `"${path.slice(0, 200)}" already exists`, {
            details: {
              path: path.slice(0, 200),
            },
          })
        }
        let created = true
        try {
          await mkdir(at(dir, name))
        } catch (err) {
          if (errnoOf(err) !== 'EEXIST' || !recursive) throw err
          created = false
        }
        let made: FileHandle
        try {
          made = await open(at(dir, name), DIR_FLAGS)
        } catch (err) {
          return followIfLink(dir, name, err)
        }
        try {
          if (created) this.#chown(made.fd)
          return this.#info(parts, await made.stat())
        } finally {
          await made.close()
        }
      },
      recursive,
    )
  }

  /** Removes a file, or a directory with `recursive`; the workspace root cannot be removed. */
  async remove(path: string, recursive = false): Promise<void> {
    const parts = this.#paths.components(path)
    if (parts.length === 0)
      throw new AgentError('FORBIDDEN', 'the workspace root cannot be removed', { details: { path } })
    await this.#walk(path, parts, async (dir, name) => {
      if (!(await lstat(at(dir, name))).isDirectory()) return unlink(at(dir, name))
      if (recursive) return removeTreeAt(dir, name)
      try {
        await rmdir(at(dir, name))
      } catch (err) {
        if (errnoOf(err) !== 'ENOTEMPTY') throw err
        throw new AgentError('DIRECTORY_NOT_EMPTY', `"${path.slice(0, 200)}" is not empty`, {
          details: { path: path.slice(0, 200) },
        })
      }
    })
  }

  /** Renames (moves) a path within the workspace; a symlink is moved as a link, never followed. */
  async rename(from: string, to: string): Promise<FileInfo> {
    const fromParts = this.#paths.components(from)
    const toParts = this.#paths.components(to)
    if (fromParts.length === 0)
      throw new AgentError('FORBIDDEN', 'the workspace root cannot be renamed', { details: { path: from } })
    if (toParts.length === 0)
      throw new AgentError('FORBIDDEN', 'the workspace root cannot be replaced; rename to a path below it', {
        details: {
          path: to,
        },
      })
    return this.#walk(from, fromParts, (fromDir, fromName) =>
      this.#walk(to, toParts, async (toDir, toName) => {
        await rename(at(fromDir, fromName), at(toDir, toName))
        return this.#info(toParts, await lstat(at(toDir, toName)))
      }),
    )
  }

  /** Walks to `parts` of `path` (creating missing parents with `create`), mapping OS errors. */
  async #walk<T>(path: string, parts: readonly string[], final: FinalStep<T>, create = false): Promise<T> {
    try {
      return await this.#walker.walk(path, parts, create ? { onCreateDir: (d) => this.#chown(d) } : {}, final)
    } catch (err) {
      throw osError(err, path)
    }
  }

  async #entries(dir: number, parts: readonly string[]): Promise<FileInfo[]> {
    const names = await readdir(at(dir, ''))
    names.sort()
    const out: FileInfo[] = []
    for (const name of names) {
      try {
        out.push(this.#info([...parts, name], await lstat(at(dir, name))))
      } catch {
        // An entry removed between readdir and lstat is simply not listed.
      }
    }
    return out
  }

  /** The stats of an open file, which must be a regular file. */
  async #regular(file: FileHandle, path: string): Promise<Stats> {
    const s = await file.stat()
    if (s.isDirectory()) throw isDirectory(path)
    if (!s.isFile()) throw notRegular(path)
    return s
  }

  #chown(fd: number): void {
    if (this.#owner !== undefined) fchownSync(fd, this.#owner.uid, this.#owner.gid)
  }

  #info(parts: readonly string[], s: Stats): FileInfo {
    const type = s.isFile()
      ? 'file'
      : s.isDirectory()
        ? 'directory'
        : s.isSymbolicLink()
          ? 'symlink'
          : 'other'
    const path = this.#paths.sandboxPath(parts)
    return {
      path,
      name: path.slice(path.lastIndexOf('/') + 1),
      type,
      size: s.size,
      mode: s.mode & 0o7777,
      mtimeMs: Math.floor(s.mtimeMs),
    }
  }
}

/** Writes every chunk at the file's position, looping over short writes. */
async function writeAll(file: FileHandle, chunks: AsyncIterable<Uint8Array>): Promise<void> {
  for await (const chunk of chunks) {
    let done = 0
    while (done < chunk.length) done += (await file.write(chunk, done, chunk.length - done)).bytesWritten
  }
}

function isDirectory(path: string, hint = 'list it instead of reading it'): AgentError {
  return new AgentError('IS_A_DIRECTORY', `"${path.slice(0, 200)}" is a directory; ${hint}`, {
    details: {
      path: path.slice(0, 200),
    },
  })
}

function notRegular(path: string): AgentError {
  return new AgentError(
    'FORBIDDEN',
    `"${path.slice(0, 200)}" is not a regular file (a FIFO, socket or device); the files API reads and writes regular files only`,
    { details: { path: path.slice(0, 200) } },
  )
}

function osError(err: unknown, path: string): Error {
  if (err instanceof AgentError) return err
  const errno = errnoOf(err)
  const known = ERRNO_ERRORS[errno]
  if (!known) return err instanceof Error ? err : new Error(String(err))
  const [code, what] = known
  return new AgentError(code, `"${path.slice(0, 200)}" ${what}`, {
    details: { path: path.slice(0, 200) },
    cause: err,
  })
}
