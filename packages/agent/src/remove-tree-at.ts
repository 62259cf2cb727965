// Removes a directory tree below an open directory without ever following a symlink: each
// subdirectory is opened with O_NOFOLLOW and emptied through its own fd, so a directory that
// code in the sandbox swaps for a symlink mid-removal is unlinked as a link, never entered.
import { type FileHandle, lstat, open, readdir, rmdir, unlink } from 'node:fs/promises'
import { at, DIR_FLAGS, errnoOf } from './workspace-walker.ts'

/** Removes `name` inside the open `dir`: a file or link is unlinked, a directory emptied and removed. */
export async function removeTreeAt(dir: number, name: string): Promise<void> {
  let sub: FileHandle
  try {
    sub = await open(at(dir, name), DIR_FLAGS)
  } catch (err) {
    const errno = errnoOf(err)
    if (errno === 'ENOTDIR' || errno === 'ELOOP') return unlink(at(dir, name))
    throw err
  }
  try {
    for (const entry of await readdir(at(sub.fd, ''))) {
      let isDir: boolean
      try {
        isDir = (await lstat(at(sub.fd, entry))).isDirectory()
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') continue
        throw err
      }
      try {
        await (isDir ? removeTreeAt(sub.fd, entry) : unlink(at(sub.fd, entry)))
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT') throw err
      }
    }
  } finally {
    await sub.close()
  }
  await rmdir(at(dir, name))
}
