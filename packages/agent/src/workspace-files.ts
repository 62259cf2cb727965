// File operations on a sandbox's workspace, every path confined by `WorkspacePaths`.
// Reads and writes stream, so a large file never sits in memory whole. OS errors become
// typed agent errors (FILE_NOT_FOUND, IS_A_DIRECTORY, ...) whose messages name the path.
import { createReadStream, createWriteStream, type ReadStream } from 'node:fs'
import { lstat, mkdir, readdir, rename, rm, stat } from 'node:fs/promises'
import { pipeline } from 'node:stream/promises'
import type { ErrorCode, FileInfo } from '@conch/protocol'
import { AgentError } from './agent-error.ts'
import type { WorkspacePaths } from './workspace-paths.ts'

const ERRNO_CODES: Record<string, ErrorCode> = {
  ENOENT: 'FILE_NOT_FOUND',
  ENOTDIR: 'NOT_A_DIRECTORY',
  EISDIR: 'IS_A_DIRECTORY',
  EEXIST: 'FILE_EXISTS',
  ENOTEMPTY: 'DIRECTORY_NOT_EMPTY',
  EACCES: 'FORBIDDEN',
  EPERM: 'FORBIDDEN',
  ELOOP: 'PATH_OUTSIDE_SANDBOX',
}

/** File operations confined to one workspace. */
export class WorkspaceFiles {
  readonly #paths: WorkspacePaths

  /** Operates inside `paths`' root. */
  constructor(paths: WorkspacePaths) {
    this.#paths = paths
  }

  /** Metadata of a path; symlinks are reported as symlinks, not followed. */
  async stat(path: string): Promise<FileInfo> {
    const host = this.#paths.resolveEntry(path)
    return this.#info(host, path)
  }

  /** The entries of a directory, sorted by name. */
  async list(path: string): Promise<FileInfo[]> {
    const host = this.#paths.resolve(path)
    const names = await this.#os(path, () => readdir(host))
    names.sort()
    const out: FileInfo[] = []
    for (const name of names) {
      try {
        out.push(await this.#info(`${host}/${name}`, `${path}/${name}`))
      } catch {
        // An entry removed between readdir and lstat is simply not listed.
      }
    }
    return out
  }

  /** Opens a file for streaming; the stream ends at the file's end. */
  async read(path: string): Promise<{ info: FileInfo; stream: ReadStream }> {
    const host = this.#paths.resolve(path)
    const s = await this.#os(path, () => stat(host))
    if (s.isDirectory())
      throw new AgentError('IS_A_DIRECTORY', `"${path}" is a directory; list it instead of reading it`, {
        path,
      })
    const info = await this.#info(host, path)
    return { info, stream: createReadStream(host) }
  }

  /** Writes a file from a stream of chunks, creating missing parent directories. */
  async write(path: string, chunks: AsyncIterable<Uint8Array>, mode?: number): Promise<FileInfo> {
    const host = this.#paths.resolve(path)
    if (this.#paths.isRoot(host))
      throw new AgentError('IS_A_DIRECTORY', 'the workspace root is a directory', { path })
    await this.#os(path, () => mkdir(host.slice(0, host.lastIndexOf('/')), { recursive: true }))
    // Checked again now that the parents exist: a command in the sandbox may have swapped a
    // directory for a symlink between the first check and the mkdir.
    this.#paths.resolve(path)
    await this.#os(path, () => pipeline(chunks, createWriteStream(host, mode === undefined ? {} : { mode })))
    return this.#info(host, path)
  }

  /** Creates a directory (and its parents with `recursive`). */
  async mkdir(path: string, recursive = false): Promise<FileInfo> {
    const host = this.#paths.resolve(path)
    await this.#os(path, () => mkdir(host, { recursive }))
    return this.#info(host, path)
  }

  /** Removes a file, or a directory with `recursive`; the workspace root cannot be removed. */
  async remove(path: string, recursive = false): Promise<void> {
    const host = this.#paths.resolveEntry(path)
    if (this.#paths.isRoot(host))
      throw new AgentError('FORBIDDEN', 'the workspace root cannot be removed', { path })
    const s = await this.#os(path, () => lstat(host))
    if (s.isDirectory() && !recursive) {
      const entries = await this.#os(path, () => readdir(host))
      if (entries.length > 0) {
        throw new AgentError(
          'DIRECTORY_NOT_EMPTY',
          `"${path}" is not empty; pass recursive: true to remove it with its contents`,
          { path },
        )
      }
    }
    await this.#os(path, () => rm(host, { recursive: true, force: false }))
  }

  /** Renames (moves) a path within the workspace. */
  async rename(from: string, to: string): Promise<FileInfo> {
    const hostFrom = this.#paths.resolveEntry(from)
    const hostTo = this.#paths.resolveEntry(to)
    if (this.#paths.isRoot(hostFrom))
      throw new AgentError('FORBIDDEN', 'the workspace root cannot be renamed', { path: from })
    await this.#os(from, () => rename(hostFrom, hostTo))
    return this.#info(hostTo, to)
  }

  async #info(host: string, path: string): Promise<FileInfo> {
    const s = await this.#os(path, () => lstat(host))
    const type = s.isFile()
      ? 'file'
      : s.isDirectory()
        ? 'directory'
        : s.isSymbolicLink()
          ? 'symlink'
          : 'other'
    const sandboxPath = this.#paths.toSandboxPath(host)
    return {
      path: sandboxPath,
      name: sandboxPath.slice(sandboxPath.lastIndexOf('/') + 1),
      type,
      size: s.size,
      mode: s.mode & 0o7777,
      mtimeMs: Math.floor(s.mtimeMs),
    }
  }

  async #os<T>(path: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      throw osError(err, path)
    }
  }
}

function osError(err: unknown, path: string): Error {
  if (err instanceof AgentError) return err
  const errno = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : ''
  const code = ERRNO_CODES[errno]
  if (!code) return err instanceof Error ? err : new Error(String(err))
  const what: Partial<Record<ErrorCode, string>> = {
    FILE_NOT_FOUND: 'does not exist; check the path (list its directory to see what is there)',
    NOT_A_DIRECTORY: 'has a file where a directory was expected',
    IS_A_DIRECTORY: 'is a directory',
    FILE_EXISTS: 'already exists',
    DIRECTORY_NOT_EMPTY: 'is a directory that is not empty; pass recursive: true',
    FORBIDDEN: 'is not accessible to the agent (permission denied)',
    PATH_OUTSIDE_SANDBOX: 'leads through too many symlinks',
  }
  return new AgentError(
    code,
    `"${path.slice(0, 200)}" ${what[code] ?? errno}`,
    { path: path.slice(0, 200) },
    { cause: err },
  )
}
