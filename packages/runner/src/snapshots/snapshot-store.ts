// The runner's snapshots: manifests and the content store under `<state dir>/snapshots/`.
//
// Model: `take` reads a workspace into the content store (`workspace-capture.ts`) and writes
// the manifest last (temp name, then rename), so a snapshot is listed only once all of its
// objects are stored. `delete` removes a manifest and sweeps every object no remaining
// manifest names. Taking, deleting and sweeping run one at a time (a sweep must never see a
// snapshot half written). The store is bounded by a count and by the logical bytes of one
// snapshot; ids are checked against `SnapshotId` before they become file names. The
// `SnapshotBackend` interface is what a remote (S3-compatible) store would implement. Beside
// the objects, `lowers/` caches snapshots' workspaces as read-only trees that forks mount
// (lower-layers.ts); the content store stays the durable format, the trees are rebuilt from it.
import { randomBytes } from 'node:crypto'
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs'
import { join } from 'node:path'
import {
  LIMITS,
  type SandboxShellState,
  SNAPSHOT_FORMAT_VERSION,
  SnapshotId,
  type SnapshotInfo,
} from '@conch/protocol'
import { RunnerError } from '../runner-error.ts'
import { ContentStore } from './content-store.ts'
import {
  type LiveImage,
  liveImageBytes,
  liveImageTooLarge,
  storeLiveImage,
  writeLiveImage,
} from './live-image.ts'
import { LowerLayers } from './lower-layers.ts'
import { isReadableFormat, SnapshotManifest, type SnapshotSandboxConfig } from './snapshot-manifest.ts'
import { type CaptureOptions, captureWorkspace, type FileFingerprint, pathKey } from './workspace-capture.ts'
import type { WorkspaceOverlay } from './workspace-overlay.ts'
import { restoreWorkspace } from './workspace-restore.ts'

/** Limits of the store. */
export interface SnapshotLimits {
  /** Most snapshots kept at once. */
  maxSnapshots: number
  /** Most snapshots kept of one sandbox. */
  maxSnapshotsPerSandbox: number
  /** Most bytes in one snapshot: its workspace's file content plus a live snapshot's image. */
  maxSnapshotBytes: number
  /** Most entries in one snapshot's workspace. */
  maxSnapshotEntries: number
}

/** Defaults of the store's limits. */
export const DEFAULT_SNAPSHOT_LIMITS: SnapshotLimits = {
  maxSnapshots: LIMITS.maxSnapshots,
  maxSnapshotsPerSandbox: LIMITS.maxSnapshotsPerSandbox,
  maxSnapshotBytes: LIMITS.maxSnapshotBytes,
  maxSnapshotEntries: LIMITS.maxSnapshotEntries,
}

/** What `take` needs besides the workspace. */
export interface SnapshotSource {
  /** The sandbox's id. */
  sandboxId: string
  /** A name for the snapshot. */
  name: string | null
  /** The sandbox's settings. */
  sandbox: SnapshotSandboxConfig
  /** The agent's capture of its shells and processes. */
  shells: SandboxShellState
  /** The sandbox's workspace on the host. */
  workspace: string
  /** A checkpoint folder to store as the snapshot's live image, with the runsc version that wrote it. */
  liveImage?: { dir: string; runscVersion: string }
  /** When the workspace is a fork's overlay: only what its upper layer holds is read. */
  overlay?: WorkspaceOverlay
}

/** Where snapshots are kept: the local folder now, an object store later. */
export interface SnapshotBackend {
  /** Stores a snapshot of `source` and returns its manifest. */
  take(source: SnapshotSource): Promise<SnapshotManifest>
  /** Every snapshot, oldest first. */
  list(): SnapshotManifest[]
  /** One snapshot; SNAPSHOT_NOT_FOUND or SNAPSHOT_INCOMPATIBLE when it cannot be used. */
  get(id: string): SnapshotManifest
  /** Writes a snapshot's workspace into an empty folder. */
  restoreWorkspace(manifest: SnapshotManifest, target: string): Promise<void>
  /** Writes a live snapshot's checkpoint image into an empty folder, checking every chunk's hash. */
  restoreLiveImage(manifest: SnapshotManifest, target: string): Promise<void>
  /** Deletes a snapshot and the objects only it used. */
  delete(id: string): Promise<void>
  /** Forgets what it remembered of a sandbox's files (the sandbox is gone). */
  forgetSandbox(sandboxId: string): void
  /** A private local folder (the runner's only) that checkpoint images pass through. */
  scratchDir(): string
  /** Read-only trees of snapshots' workspaces that forks mount as overlays; absent, forks copy. */
  readonly lowers?: LowerLayers
}

/** Sandboxes whose file fingerprints are remembered at once (the most recently snapshotted). */
const REMEMBERED_SANDBOXES = 8

/** The local snapshot store in the runner's state dir. */
export class SnapshotStore implements SnapshotBackend {
  readonly #dir: string
  readonly #objects: ContentStore
  readonly #limits: SnapshotLimits
  readonly #now: () => number
  /** The snapshots' workspaces as read-only trees for forks to mount. */
  readonly lowers: LowerLayers
  /** Fingerprints of the last snapshot of recent sandboxes, so the next one reads only changed files. */
  readonly #fingerprints = new Map<string, Map<string, FileFingerprint>>()
  #queue: Promise<unknown> = Promise.resolve()

  /** Keeps snapshots in `<stateDir>/snapshots`. */
  constructor(
    stateDir: string,
    limits: SnapshotLimits = DEFAULT_SNAPSHOT_LIMITS,
    now: () => number = Date.now,
  ) {
    this.#dir = join(stateDir, 'snapshots')
    mkdirSync(join(this.#dir, 'manifests'), { recursive: true, mode: 0o700 })
    this.#objects = new ContentStore(join(this.#dir, 'objects'))
    this.#limits = limits
    this.#now = now
    this.lowers = new LowerLayers(join(this.#dir, 'lowers'), this.#objects)
    this.lowers.sweep(new Set(this.#ids()))
  }

  /** Stores a snapshot of `source`. */
  take(source: SnapshotSource): Promise<SnapshotManifest> {
    return this.#serial(async () => {
      const count = this.#ids().length
      if (count >= this.#limits.maxSnapshots) {
        throw new RunnerError(
          'TOO_MANY_SNAPSHOTS',
          `the runner already keeps ${count} snapshots (the limit); delete snapshots you no longer need, or ask the operator to raise --max-snapshots.`,
          { details: { limit: this.#limits.maxSnapshots } },
        )
      }
      const own = this.list().filter((m) => m.sandboxId === source.sandboxId).length
      if (own >= this.#limits.maxSnapshotsPerSandbox) {
        throw new RunnerError(
          'TOO_MANY_SNAPSHOTS',
          `sandbox ${source.sandboxId} already has ${own} snapshots (the limit per sandbox); delete one of them first, or ask the operator to raise --max-snapshots-per-sandbox.`,
          { details: { limit: this.#limits.maxSnapshotsPerSandbox } },
        )
      }
      // A live image counts against the byte limit with the workspace; one that alone passes
      // it is refused before anything is stored.
      const limit = this.#limits.maxSnapshotBytes
      const imageBytes = source.liveImage ? liveImageBytes(source.liveImage.dir) : 0
      if (imageBytes > limit) throw liveImageTooLarge(imageBytes, 0, limit)
      let captured: Awaited<ReturnType<typeof captureWorkspace>>
      try {
        captured = await captureWorkspace(source.workspace, this.#objects, {
          maxBytes: this.#limits.maxSnapshotBytes,
          maxEntries: this.#limits.maxSnapshotEntries,
          previous: this.#fingerprints.get(source.sandboxId) ?? new Map(),
          ...(source.overlay ? this.#base(source.overlay) : {}),
        })
      } catch (error) {
        // Objects stored before the capture failed belong to no snapshot.
        this.#sweep()
        throw error
      }
      let live: { image: LiveImage; addedBytes: number } | undefined
      try {
        if (captured.bytes + imageBytes > limit) throw liveImageTooLarge(imageBytes, captured.bytes, limit)
        live =
          source.liveImage &&
          (await storeLiveImage(source.liveImage.dir, this.#objects, source.liveImage.runscVersion, {
            maxBytes: limit - captured.bytes,
            workspaceBytes: captured.bytes,
            limit,
          }))
      } catch (error) {
        this.#sweep()
        throw error
      }
      this.#fingerprints.delete(source.sandboxId)
      this.#fingerprints.set(source.sandboxId, captured.fingerprints)
      for (const oldest of this.#fingerprints.keys()) {
        if (this.#fingerprints.size <= REMEMBERED_SANDBOXES) break
        this.#fingerprints.delete(oldest)
      }
      const manifest: SnapshotManifest = {
        formatVersion: SNAPSHOT_FORMAT_VERSION,
        id: `snap_${base62(20)}`,
        name: source.name,
        sandboxId: source.sandboxId,
        createdAt: this.#now(),
        sandbox: source.sandbox,
        shells: source.shells,
        workspace: { entries: captured.entries, bytes: captured.bytes, skipped: captured.skipped },
        storedBytes: captured.addedBytes + (live?.addedBytes ?? 0),
        ...(live ? { live: live.image } : {}),
      }
      // The pack's index lands before the manifest that names its objects.
      this.#objects.seal()
      this.#write(manifest)
      return manifest
    })
  }

  /** What a fork's capture skips: the files of the snapshot below its overlay, while that snapshot is kept. */
  #base(overlay: WorkspaceOverlay): Pick<CaptureOptions, 'base'> {
    let manifest: SnapshotManifest
    try {
      manifest = this.get(overlay.snapshotId)
    } catch {
      return {} // deleted: its objects are gone, every file is read
    }
    const files = new Map<string, { size: number; chunks: string[] }>()
    for (const entry of manifest.workspace.entries) {
      if (entry.type === 'file') files.set(pathKey(entry.path), { size: entry.size, chunks: entry.chunks })
    }
    return { base: { upper: overlay.upper, files } }
  }

  /** Every readable snapshot, oldest first. */
  list(): SnapshotManifest[] {
    const manifests: SnapshotManifest[] = []
    for (const id of this.#ids()) {
      try {
        manifests.push(this.get(id))
      } catch {
        // unreadable: listed by nothing, deletable by id
      }
    }
    return manifests.sort((a, b) => a.createdAt - b.createdAt)
  }

  /** One snapshot by id. */
  get(id: string): SnapshotManifest {
    const path = this.#manifestPath(id)
    let text: string
    try {
      text = readFileSync(path, 'utf8')
    } catch {
      throw notFound(id)
    }
    let raw: unknown
    try {
      raw = JSON.parse(text)
    } catch {
      raw = null
    }
    const version =
      typeof raw === 'object' && raw !== null && 'formatVersion' in raw ? raw.formatVersion : undefined
    if (typeof version !== 'number' || !isReadableFormat(version)) {
      throw new RunnerError(
        'SNAPSHOT_INCOMPATIBLE',
        `snapshot ${id} is in format version ${String(version)}, and this runner reads version ${SNAPSHOT_FORMAT_VERSION}; restore it with a runner of its version`,
        {
          details: {
            formatVersion: typeof version === 'number' && Number.isInteger(version) ? version : null,
          },
        },
      )
    }
    const parsed = SnapshotManifest.safeParse(raw)
    if (!parsed.success) {
      throw new RunnerError(
        'SNAPSHOT_INCOMPATIBLE',
        `snapshot ${id} is damaged (${parsed.error.issues[0]?.message ?? 'invalid manifest'}); delete it and take a new one.`,
      )
    }
    return parsed.data
  }

  /** Writes a snapshot's workspace into the empty folder `target`. */
  restoreWorkspace(manifest: SnapshotManifest, target: string): Promise<void> {
    return restoreWorkspace(target, manifest.workspace.entries, this.#objects)
  }

  /** Writes a live snapshot's checkpoint image into the empty folder `target`. */
  restoreLiveImage(manifest: SnapshotManifest, target: string): Promise<void> {
    if (!manifest.live) throw new RunnerError('BAD_REQUEST', `snapshot ${manifest.id} has no live image`)
    return writeLiveImage(manifest.live, this.#objects, target, manifest.id)
  }

  /** Deletes a snapshot and sweeps the objects no other snapshot uses. */
  delete(id: string): Promise<void> {
    return this.#serial(async () => {
      const path = this.#manifestPath(id)
      try {
        readFileSync(path)
      } catch {
        throw notFound(id)
      }
      rmSync(path, { force: true })
      this.lowers.drop(id)
      this.#sweep()
    })
  }

  /** Deletes every object that no readable snapshot names. */
  #sweep(): void {
    const keep = new Set<string>()
    for (const manifest of this.list()) {
      for (const entry of manifest.workspace.entries) {
        if (entry.type === 'file') for (const hash of entry.chunks) keep.add(hash)
      }
      for (const file of manifest.live?.files ?? []) for (const hash of file.chunks) keep.add(hash)
    }
    this.#objects.sweep(keep)
  }

  /** The store's private folder for checkpoint images on their way in or out (0700, root's). */
  scratchDir(): string {
    const dir = join(this.#dir, 'scratch')
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    return dir
  }

  /** Forgets what it remembered of a sandbox's files (the sandbox is gone). */
  forgetSandbox(sandboxId: string): void {
    this.#fingerprints.delete(sandboxId)
  }

  #ids(): string[] {
    return readdirSync(join(this.#dir, 'manifests'))
      .filter((name) => name.endsWith('.json'))
      .map((name) => name.slice(0, -'.json'.length))
      .filter((id) => SnapshotId.safeParse(id).success)
  }

  #manifestPath(id: string): string {
    if (!SnapshotId.safeParse(id).success) throw notFound(id)
    return join(this.#dir, 'manifests', `${id}.json`)
  }

  #write(manifest: SnapshotManifest): void {
    const path = this.#manifestPath(manifest.id)
    const temp = `${path}.${randomBytes(4).toString('hex')}.tmp`
    const fd = openSync(temp, 'wx', 0o600)
    try {
      const bytes = Buffer.from(JSON.stringify(manifest))
      let at = 0
      while (at < bytes.length) at += writeSync(fd, bytes, at, bytes.length - at)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(temp, path)
  }

  #serial<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(task, task)
    this.#queue = run.catch(() => {})
    return run
  }
}

/** A snapshot as the API lists it. */
export function snapshotInfo(manifest: SnapshotManifest): SnapshotInfo {
  return {
    id: manifest.id,
    name: manifest.name,
    sandboxId: manifest.sandboxId,
    createdAt: manifest.createdAt,
    formatVersion: manifest.formatVersion,
    sessions: manifest.shells.sessions.map((s) => s.id),
    entries: manifest.workspace.entries.length,
    workspaceBytes: manifest.workspace.bytes,
    storedBytes: manifest.storedBytes,
    processes: manifest.shells.processes.map((p) => ({ command: p.command, cwd: p.cwd, running: p.running })),
  }
}

function notFound(id: string): RunnerError {
  return new RunnerError(
    'SNAPSHOT_NOT_FOUND',
    `snapshot ${JSON.stringify(id.slice(0, 64))} does not exist on this runner; list snapshots to see their ids.`,
    { details: { snapshotId: id.slice(0, 64) } },
  )
}

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

function base62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}
