// Removing a rootless sandbox's folder. Rootless, sandbox code runs as the runner's own uid, so
// every file it made in its workspace is the runner's on the host, and it may have left dirs the
// owner cannot list or enter (`chmod 0`). The owner may always chmod its own dirs back, so
// removal opens them first and never follows a symlink out of the tree.
import { chmodSync, lstatSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'

/** Gives the owner rwx on every dir under `path` (symlinks are not followed). */
function openDirs(path: string): void {
  let stat: ReturnType<typeof lstatSync>
  try {
    stat = lstatSync(path)
  } catch {
    return
  }
  if (!stat.isDirectory()) return
  try {
    chmodSync(path, 0o700)
  } catch {
    return
  }
  for (const name of readdirSync(path)) openDirs(join(path, name))
}

/** Deletes `dir` and everything in it, reopening dirs sandbox code closed to their owner. */
export function removeOwnTree(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true })
  } catch {
    openDirs(dir)
    rmSync(dir, { recursive: true, force: true })
  }
}
