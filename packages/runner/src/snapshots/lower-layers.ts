// The read-only lower layers that forks mount: each snapshot's workspace written out once as a
// plain directory tree beside the content store, shared by every fork of it through overlayfs
// (workspace-overlay.ts), so a fork costs a mount rather than a copy.
//
// Model: `lowers/<snapshot id>-<uid>/tree` is the workspace as `workspace-restore.ts` writes
// it, its files owned by `uid` (the sandbox user of the driver that forks it). A tree is a
// cache: the content store stays the durable format, and a missing tree is written again
// from it. It is written under a temp name and renamed, once however many forks ask at the
// same time. Who uses it is kept on disk, so a runner restart keeps the count: one file per
// fork in `users/`, naming the fork's overlay folder. Deleting the snapshot leaves a
// `deleted` mark; the tree goes once the mark is there and the last user released it. Nothing
// ever writes into a finished tree: overlayfs writes only the fork's upper layer, and the
// runner's state dir (0700) is never bound into a sandbox.
import { randomBytes } from 'node:crypto'
import {
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { RunnerError } from '../runner-error.ts'
import type { ContentStore } from './content-store.ts'
import type { SnapshotManifest, WorkspaceEntry } from './snapshot-manifest.ts'
import { restoreWorkspace } from './workspace-restore.ts'

/** A written tree whose files a new tree may share: the tree and the snapshot it was written from. */
export interface TreeDonor {
  /** The written tree. */
  tree: string
  /** The snapshot it was written from. */
  manifest: SnapshotManifest
}

/**
 * Where a file of a new tree can be linked from: the donor's file at the same path when the
 * donor's snapshot holds it with the same chunks, size, mode and mtime (the restore checks the
 * file there before it links it). Trees are never written after they are renamed into place,
 * so sharing an inode between two of them is safe.
 */
function linkFrom(donor: TreeDonor): (entry: FileEntry) => Buffer | null {
  const files = new Map<string, FileEntry>()
  for (const entry of donor.manifest.workspace.entries) {
    if (entry.type === 'file') files.set(entry.path.join('/'), entry)
  }
  return (entry) => {
    const known = files.get(entry.path.join('/'))
    if (
      known === undefined ||
      known.mode !== entry.mode ||
      // A time that went through utimes comes back within a microsecond, not to the last bit.
      Math.abs(known.mtimeMs - entry.mtimeMs) >= 1 ||
      known.size !== entry.size ||
      known.chunks.join() !== entry.chunks.join()
    ) {
      return null
    }
    return Buffer.concat(
      [Buffer.from(donor.tree), ...entry.path.map((p) => Buffer.from(p, 'base64'))].flatMap((part, i) =>
        i === 0 ? [part] : [Buffer.from('/'), part],
      ),
    )
  }
}

/** A fork's hold on a lower tree; given back with `releaseLower`. */
export interface LowerLease {
  /** The read-only tree to mount as the lower layer. */
  tree: string
  /** The file that counts this fork among the tree's users. */
  userFile: string
}

const DELETED = 'deleted'

type FileEntry = Extract<WorkspaceEntry, { type: 'file' }>

/** The lower trees of one snapshot store. */
export class LowerLayers {
  readonly #dir: string
  readonly #objects: ContentStore
  /** Trees being written, by folder name: concurrent forks wait on one write. */
  readonly #writing = new Map<string, Promise<string>>()

  /** Keeps trees in `dir`, written from `objects`. */
  constructor(dir: string, objects: ContentStore) {
    this.#dir = dir
    this.#objects = objects
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  }

  /**
   * Counts the fork whose overlay folder is `forkDir` as a user of `manifest`'s tree for
   * `uid`, writing the tree first when it is not there; SNAPSHOT_NOT_FOUND when the snapshot
   * was deleted meanwhile.
   */
  async acquire(manifest: SnapshotManifest, uid: number, forkDir: string): Promise<LowerLease> {
    const name = `${manifest.id}-${uid}`
    const dir = join(this.#dir, name)
    const tree = await this.#tree(name, manifest, uid)
    const users = join(dir, 'users')
    mkdirSync(users, { recursive: true, mode: 0o700 })
    const userFile = join(users, randomBytes(8).toString('hex'))
    writeFileSync(userFile, forkDir, { mode: 0o600, flag: 'wx' })
    // The mark is written before `drop` counts users, the user file before this check: one of
    // the two always sees the other.
    if (existsSync(join(dir, DELETED))) {
      releaseLower(userFile)
      throw new RunnerError(
        'SNAPSHOT_NOT_FOUND',
        `snapshot ${manifest.id} was deleted while the fork started; fork another snapshot.`,
        { details: { snapshotId: manifest.id } },
      )
    }
    return { tree, userFile }
  }

  /**
   * Writes `manifest`'s tree for `uid` ahead of its first fork (no fork is counted). With
   * `donor` (the tree below the fork this snapshot was taken of, and that tree's snapshot),
   * files the two snapshots hold alike are hard links into the donor's tree, not copies.
   */
  async prepare(manifest: SnapshotManifest, uid: number, donor?: TreeDonor): Promise<void> {
    await this.#tree(`${manifest.id}-${uid}`, manifest, uid, donor)
    // Deleted while it was written: nothing will release it.
    collect(join(this.#dir, `${manifest.id}-${uid}`))
  }

  /** The tree of `name`, written from the store unless it is there. */
  #tree(name: string, manifest: SnapshotManifest, uid: number, donor?: TreeDonor): Promise<string> {
    const tree = join(this.#dir, name, 'tree')
    if (existsSync(tree)) return Promise.resolve(tree)
    let writing = this.#writing.get(name)
    if (writing === undefined) {
      writing = this.#write(name, manifest, uid, donor).finally(() => this.#writing.delete(name))
      this.#writing.set(name, writing)
    }
    return writing
  }

  async #write(name: string, manifest: SnapshotManifest, uid: number, donor?: TreeDonor): Promise<string> {
    const dir = join(this.#dir, name)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const tree = join(dir, 'tree')
    const temp = join(dir, `.tree-${randomBytes(6).toString('hex')}`)
    mkdirSync(temp, { mode: 0o755 })
    try {
      chownSync(temp, uid, uid)
      await restoreWorkspace(temp, manifest.workspace.entries, this.#objects, donor && linkFrom(donor))
      renameSync(temp, tree)
    } catch (error) {
      rmSync(temp, { recursive: true, force: true })
      throw error
    }
    return tree
  }

  /** Writes `tree` (a tree of this store that went missing) again from the store. */
  async rebuild(manifest: SnapshotManifest, tree: string): Promise<void> {
    const name = basename(dirname(tree))
    const match = /^(snap_[A-Za-z0-9]+)-(\d+)$/.exec(name)
    if (dirname(dirname(tree)) !== this.#dir || match === null || match[1] !== manifest.id) {
      throw new RunnerError('INTERNAL', `${tree} is not a lower tree of snapshot ${manifest.id}`)
    }
    await this.#tree(name, manifest, Number(match[2]))
  }

  /** Marks the snapshot's trees deleted; a tree no fork uses goes now, the others with their last fork. */
  drop(snapshotId: string): void {
    for (const name of this.#names()) {
      if (!name.startsWith(`${snapshotId}-`)) continue
      const dir = join(this.#dir, name)
      writeFileSync(join(dir, DELETED), '', { mode: 0o600 })
      collect(dir)
    }
  }

  /**
   * Forgets users whose fork folder is gone (a runner that died between destroying a fork and
   * releasing it) and deletes trees of snapshots not in `kept` that no fork uses.
   */
  sweep(kept: ReadonlySet<string>): void {
    for (const name of this.#names()) {
      const dir = join(this.#dir, name)
      const users = join(dir, 'users')
      for (const user of existsSync(users) ? readdirSync(users) : []) {
        let forkDir = ''
        try {
          forkDir = readFileSync(join(users, user), 'utf8')
        } catch {
          // unreadable: stale
        }
        if (forkDir === '' || !existsSync(forkDir)) rmSync(join(users, user), { force: true })
      }
      const id = name.replace(/-\d+$/, '')
      if (!kept.has(id)) writeFileSync(join(dir, DELETED), '', { mode: 0o600 })
      collect(dir)
    }
  }

  /** How many forks use the snapshot's trees (for tests and the bench). */
  users(snapshotId: string): number {
    let count = 0
    for (const name of this.#names()) {
      if (!name.startsWith(`${snapshotId}-`)) continue
      const users = join(this.#dir, name, 'users')
      count += existsSync(users) ? readdirSync(users).length : 0
    }
    return count
  }

  /** Whether a tree of the snapshot is written. */
  has(snapshotId: string): boolean {
    return this.#names().some((n) => n.startsWith(`${snapshotId}-`) && existsSync(join(this.#dir, n, 'tree')))
  }

  #names(): string[] {
    return readdirSync(this.#dir).filter((n) => /^snap_[A-Za-z0-9]+-\d+$/.test(n))
  }
}

/** Gives back a fork's hold on its lower tree; the tree goes when it was the last of a deleted snapshot's. */
export function releaseLower(userFile: string): void {
  const users = dirname(userFile)
  if (basename(users) !== 'users') return
  rmSync(userFile, { force: true })
  collect(dirname(users))
}

/** Deletes a lower folder that is marked deleted and has no users. */
function collect(dir: string): void {
  const users = join(dir, 'users')
  if (!existsSync(join(dir, DELETED))) return
  if (existsSync(users) && readdirSync(users).length > 0) return
  rmSync(dir, { recursive: true, force: true })
}
