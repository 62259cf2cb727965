// Snapshots of live sandboxes and forks from them: the runner's side of `snapshot.capture`
// and `snapshot.restore`, around the snapshot store.
//
// Model: taking a snapshot asks the agent for every open shell's state (an internal run per
// session, queued behind that session's runs), then reads the workspace on the host into the
// store. The two are not one atomic instant: a background process writing meanwhile may leave
// a file newer than the shells' state (as copying a live machine would). A fork is a normal
// create whose settings default to the snapshot's: its workspace is written before its agent
// starts (so no sandbox code runs while it is written), and once the agent answers, each
// session is created with its id and its state put back. Processes restart; they do not
// continue, and the new sandbox's `restoredFrom` says so.
//
// Live snapshots (a driver with `checkpoint`, the gVisor driver): after the shells' state, the
// agent suspends its link and the driver checkpoints the whole sandbox (processes, memory, the
// sessions' output logs) into an image, stored with the workspace read while the sandbox is
// stopped. A snapshot that goes on is then restored in place from that image; a hibernation
// is not. A fork or wake on a driver that restores images starts from the image, so its
// commands keep running and its output offsets continue; elsewhere it falls back to the
// shell-state restore above. docs/SNAPSHOTS.md describes both.
//
// A fork's workspace is, where the runner can mount one (root), an overlay of the snapshot's
// shared read-only tree (snapshots/lower-layers.ts, workspace-overlay.ts): the restore is a
// mount, and the fork's next snapshot reads only what it wrote. Elsewhere the workspace is
// copied out of the store, and the log says why.
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { CreateSandboxRequest, RestoredSession, SandboxInfo, SnapshotInfo } from '@conch/protocol'
import type { AgentLink } from './agent-link.ts'
import type { DriverSandbox, SandboxDriver } from './drivers/sandbox-driver.ts'
import type { InheritedLifetimes } from './lifetime-settings.ts'
import { RunnerError } from './runner-error.ts'
import { releaseLower, type TreeDonor } from './snapshots/lower-layers.ts'
import type { SnapshotManifest } from './snapshots/snapshot-manifest.ts'
import { type SnapshotBackend, snapshotInfo } from './snapshots/snapshot-store.ts'
import {
  mountWorkspaceOverlay,
  overlayDirOf,
  overlayProblem,
  releaseWorkspaceOverlay,
  remountWorkspaceOverlay,
  type WorkspaceOverlay,
  workspaceOverlay,
} from './snapshots/workspace-overlay.ts'
import type { SandboxRecord } from './state-store.ts'

/**
 * The caller's steps around a live snapshot's checkpoint: `suspended` once the agent let go of
 * its link; `after` with the image folder (null when none was written) and whether the snapshot
 * was stored.
 */
export interface LiveSteps {
  /** The agent let go of its link. */
  suspended: () => void
  /** The checkpoint is over, stored or not. */
  after: (imageDir: string | null, stored: boolean) => Promise<void>
}

/** Where the runner says why a fork copies its workspace instead of mounting it. */
export interface SnapshotsLogger {
  info(details: object, message: string): void
}

/** How a fork's workspace was made: mounted over the shared tree, or copied out of the store. */
export type WorkspaceRestore = 'overlay' | 'copy'

/** How a fork came out, for the new sandbox's `restoredFrom`. */
export type RestoredFrom = NonNullable<SandboxInfo['restoredFrom']>

/** Takes snapshots of sandboxes and restores them into new ones. */
export class SandboxSnapshots {
  readonly #store: SnapshotBackend
  readonly #logger: SnapshotsLogger | undefined
  /** Why forks copy their workspace here (null: they mount it); `undefined` until first asked. */
  #overlayProblem: string | null | undefined
  /** Whether the copy's reason was logged already. */
  #loggedCopy = false

  /** Works on `store`; says on `logger` why forks copy when they cannot mount. */
  constructor(store: SnapshotBackend, logger?: SnapshotsLogger, overlay: 'auto' | 'off' = 'auto') {
    this.#store = store
    this.#logger = logger
    if (overlay === 'off') this.#overlayProblem = 'overlay workspaces are turned off on this runner'
  }

  /**
   * Writes a live snapshot's image into a fresh folder, runs `use` with it (a driver's
   * `restoreAgent`), then deletes the folder.
   */
  async withLiveImage<T>(manifest: SnapshotManifest, use: (imageDir: string) => Promise<T>): Promise<T> {
    const imageDir = mkdtempSync(join(this.#store.scratchDir(), 'restore-'))
    try {
      await this.#store.restoreLiveImage(manifest, imageDir)
      return await use(imageDir)
    } finally {
      rmSync(imageDir, { recursive: true, force: true })
    }
  }

  /** How a sandbox restored from a live image came out: every session its agent has, as it was. */
  async liveRestored(manifest: SnapshotManifest, link: AgentLink): Promise<RestoredFrom> {
    const { sessions } = await link.call('session.list', {})
    return {
      snapshotId: manifest.id,
      sessions: sessions.map((s) => ({ id: s.id, problems: [] })),
      processesRestarted: 0,
    }
  }

  /** The store (for listing and deleting). */
  get store(): SnapshotBackend {
    return this.#store
  }

  /** Whether snapshots of this driver's sandboxes are live (checkpoint images). */
  isLive(driver: SandboxDriver): boolean {
    return driver.checkpoint !== undefined && driver.restoreAgent !== undefined
  }

  /** Whether a fork or wake of `manifest` on `driver` restores its checkpoint image. */
  restoresLive(manifest: SnapshotManifest, driver: SandboxDriver): boolean {
    return (
      manifest.live !== undefined &&
      this.isLive(driver) &&
      manifest.sandbox.driver === driver.name &&
      manifest.live.runscVersion === driver.version?.()
    )
  }

  /**
   * Snapshots a running sandbox through its agent link and its driver. With a live driver,
   * `live` runs the checkpoint: `suspended` is called once the agent let go of its link, and
   * `after` with the image folder once it is stored (to restore the sandbox in place), or on
   * failure (null when no image was written); `stored` says whether the snapshot was kept (a
   * store that refused the image, such as over the size limit, leaves it false).
   */
  async take(
    record: SandboxRecord,
    link: AgentLink,
    driver: SandboxDriver,
    handle: DriverSandbox,
    name: string | null,
    live?: LiveSteps,
  ): Promise<SnapshotInfo> {
    const workspace = hostWorkspace(driver, handle)
    // A fork whose host lost its overlay mount is mounted again: never snapshot the bare folder.
    await remountWorkspaceOverlay(workspace, (overlay) => this.#rebuildTree(overlay))
    const overlay = workspaceOverlay(workspace) ?? undefined
    if (live !== undefined && driver.checkpoint !== undefined) {
      // The shell state is only for a restore elsewhere: a shell in the middle of a command,
      // which the image keeps running, has none to give, and the snapshot goes on without it.
      const shells = await link.call('snapshot.capture', {}).catch((error: unknown) => {
        if (error instanceof RunnerError && error.code === 'SESSION_BUSY')
          return { sessions: [], processes: [] }
        throw error
      })
      await link.call('link.suspend', {})
      live.suspended()
      const imageDir = mkdtempSync(join(this.#store.scratchDir(), 'image-'))
      let checkpointed = false
      let stored = false
      try {
        await driver.checkpoint(handle, imageDir)
        checkpointed = true
        const manifest = await this.#store.take({
          sandboxId: record.id,
          name,
          sandbox: sandboxConfig(record),
          shells,
          workspace,
          ...(overlay ? { overlay } : {}),
          liveImage: { dir: imageDir, runscVersion: driver.version?.() ?? 'unknown' },
        })
        stored = true
        this.#prepareTree(manifest, workspace, overlay)
        return snapshotInfo(manifest)
      } finally {
        try {
          await live.after(checkpointed ? imageDir : null, stored)
        } finally {
          rmSync(imageDir, { recursive: true, force: true })
        }
      }
    }
    const shells = await link.call('snapshot.capture', {})
    const manifest = await this.#store.take({
      sandboxId: record.id,
      name,
      sandbox: sandboxConfig(record),
      shells,
      workspace,
      ...(overlay ? { overlay } : {}),
    })
    this.#prepareTree(manifest, workspace, overlay)
    return snapshotInfo(manifest)
  }

  /**
   * Forks will mount the snapshot's tree: it is written now, off the snapshot's reply, so the
   * first fork costs a mount too. A hibernation is restored once, by its own wake, and keeps
   * no tree ahead.
   */
  #prepareTree(manifest: SnapshotManifest, workspace: string, overlay: WorkspaceOverlay | undefined): void {
    if (manifest.name === 'hibernation' || !this.#canMount()) return
    // A fork's snapshot shares the files it did not change with the tree below the fork.
    let donor: TreeDonor | undefined
    try {
      donor = overlay && { tree: overlay.tree, manifest: this.#store.get(overlay.snapshotId) }
    } catch {
      donor = undefined // that snapshot is gone: its tree is written whole
    }
    this.#store.lowers?.prepare(manifest, statSync(workspace).uid, donor).catch((error: unknown) => {
      this.#logger?.info({ snapshotId: manifest.id, error: String(error) }, 'lower tree not written ahead')
    })
  }

  /** Whether forks mount overlays here; says why not, once. */
  #canMount(): boolean {
    this.#overlayProblem ??=
      this.#store.lowers === undefined ? 'the snapshot store keeps no lower trees' : overlayProblem()
    if (this.#overlayProblem !== null && !this.#loggedCopy) {
      this.#loggedCopy = true
      this.#logger?.info({ reason: this.#overlayProblem }, 'forks copy their workspace: no overlay here')
    }
    return this.#overlayProblem === null
  }

  /** Writes a fork's lower tree back from the store when it went missing (a cache cleared by hand). */
  async #rebuildTree(overlay: { snapshotId: string; tree: string }): Promise<void> {
    const manifest = this.#store.get(overlay.snapshotId)
    await this.#store.lowers?.rebuild(manifest, overlay.tree)
  }

  /**
   * Snapshots a sandbox about to hibernate; returns the driver state its record keeps while
   * it sleeps (the snapshot's id).
   */
  async hibernate(
    record: SandboxRecord,
    link: AgentLink,
    driver: SandboxDriver,
    handle: DriverSandbox,
    live?: LiveSteps,
  ): Promise<Record<string, unknown>> {
    const info = await this.take(record, link, driver, handle, 'hibernation', live)
    return { hibernatedFrom: info.id }
  }

  /** The snapshot a hibernated sandbox sleeps in. */
  hibernation(record: SandboxRecord): SnapshotManifest {
    const id = record.driverState.hibernatedFrom
    if (typeof id !== 'string') {
      throw new RunnerError(
        'SNAPSHOT_NOT_FOUND',
        `sandbox ${record.id} is hibernated but its snapshot is not recorded; destroy the sandbox.`,
      )
    }
    return this.#store.get(id)
  }

  /** Deletes the snapshot of a hibernated sandbox that is being destroyed. */
  async dropHibernation(record: SandboxRecord): Promise<void> {
    const id = record.driverState.hibernatedFrom
    if (typeof id === 'string') await this.#store.delete(id).catch(() => {})
  }

  /**
   * The snapshot a create request forks from, the request with the snapshot's settings as
   * defaults, and the idle settings the fork inherits (lifetime-settings.ts applies them where
   * the request names none).
   */
  forkRequest(request: CreateSandboxRequest): {
    request: CreateSandboxRequest
    manifest: SnapshotManifest | null
    lifetimes?: InheritedLifetimes
  } {
    if (request.fromSnapshot === undefined) return { request, manifest: null }
    const manifest = this.#store.get(request.fromSnapshot)
    const { sandbox } = manifest
    return {
      manifest,
      request: {
        ...request,
        driver: request.driver ?? sandbox.driver,
        env: request.env ?? sandbox.env,
        limits: request.limits ?? sandbox.limits,
        metadata: request.metadata ?? sandbox.metadata,
      },
      lifetimes: {
        snapshotId: manifest.id,
        idleTimeoutMs: sandbox.idleTimeoutMs,
        ...(sandbox.hibernateAfterMs !== undefined ? { hibernateAfterMs: sandbox.hibernateAfterMs } : {}),
        ...(sandbox.sessionIdleTimeoutMs !== undefined
          ? { sessionIdleTimeoutMs: sandbox.sessionIdleTimeoutMs }
          : {}),
      },
    }
  }

  /**
   * Puts the snapshot's workspace into a sandbox whose agent has not started yet: mounts the
   * overlay of its shared tree where the runner can, else copies it out of the store.
   */
  async restoreWorkspace(
    manifest: SnapshotManifest,
    driver: SandboxDriver,
    handle: DriverSandbox,
  ): Promise<WorkspaceRestore> {
    const workspace = hostWorkspace(driver, handle)
    const lowers = this.#store.lowers
    if (this.#canMount() && lowers !== undefined) {
      const lease = await lowers.acquire(manifest, statSync(workspace).uid, overlayDirOf(workspace))
      try {
        await mountWorkspaceOverlay(workspace, manifest.id, lease)
        return 'overlay'
      } catch (error) {
        // No trace of the overlay may stay: a lease beside a copied workspace would make the
        // fork's next snapshot take its files for the snapshot's.
        await releaseWorkspaceOverlay(workspace)
        releaseLower(lease.userFile)
        rmSync(overlayDirOf(workspace), { recursive: true, force: true })
        this.#logger?.info(
          {
            sandboxId: handle.id,
            snapshotId: manifest.id,
            reason: error instanceof Error ? error.message : String(error),
          },
          'fork copies its workspace: the overlay mount failed',
        )
      }
    }
    await this.#store.restoreWorkspace(manifest, workspace)
    return 'copy'
  }

  /** Puts every session back through the new sandbox's agent; restarts processes when asked. */
  async restoreShells(
    manifest: SnapshotManifest,
    link: AgentLink,
    restartProcesses: boolean,
  ): Promise<RestoredFrom> {
    const { sessions } = await link.call('snapshot.restore', { state: manifest.shells, restartProcesses })
    return {
      snapshotId: manifest.id,
      sessions: sessions satisfies RestoredSession[],
      processesRestarted: restartProcesses ? manifest.shells.processes.filter((p) => p.running).length : 0,
    }
  }
}

function sandboxConfig(record: SandboxRecord): SnapshotManifest['sandbox'] {
  return {
    driver: record.driver,
    limits: record.limits,
    env: record.env,
    metadata: record.metadata,
    idleTimeoutMs: record.idleTimeoutMs,
    hibernateAfterMs: record.hibernateAfterMs,
    sessionIdleTimeoutMs: record.sessionIdleTimeoutMs,
  }
}

function hostWorkspace(driver: SandboxDriver, handle: DriverSandbox): string {
  if (driver.hostWorkspace === undefined) {
    throw new RunnerError(
      'BAD_REQUEST',
      `the ${driver.name} driver cannot take or restore snapshots (its workspace is not on this host); use the local, namespace or gvisor driver.`,
    )
  }
  return driver.hostWorkspace(handle)
}
