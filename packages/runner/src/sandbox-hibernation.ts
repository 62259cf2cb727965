// Hibernation: a sandbox snapshotted (every open shell and its workspace) and then stopped, so
// it holds no memory or processes; its record stays, `hibernated`, with the snapshot's id as its
// driver state (`hibernatedFrom`), so it survives a runner restart. The next request that needs
// its agent wakes it: the driver creates the same sandbox id again with a new link secret, the
// workspace is written back before the agent starts, the shells are restored and background
// processes restarted (or, from a live gVisor image, the same processes go on running), and the snapshot is deleted. A wake that fails leaves it hibernated with
// its snapshot, for the next attempt. `sandbox-lifetimes.ts` hibernates idle sandboxes.
import { mintLinkSecret } from '@conch/protocol/link-proof'
import type { FastifyBaseLogger as Logger } from 'fastify'
import type { AgentLink } from './agent-link.ts'
import {
  type DriverSandbox,
  linkSecretOf,
  type SandboxDriver,
  type SandboxSpec,
} from './drivers/sandbox-driver.ts'
import { RunnerError } from './runner-error.ts'
import type { SandboxRuntime } from './sandbox-runtime.ts'
import type { SandboxSnapshots } from './sandbox-snapshots.ts'
import type { SandboxRecord, StateStore } from './state-store.ts'

/** What hibernation needs from the runner. */
export interface SandboxHibernationOptions {
  /** The snapshot service. */
  snapshots: SandboxSnapshots
  /** Drivers by name. */
  drivers: ReadonlyMap<string, SandboxDriver>
  /** Durable state. */
  store: StateStore
  /** Logger. */
  logger: Logger
  /** The spec a sandbox is started again with: its settings and a fresh `linkSecret`. */
  specOf: (record: SandboxRecord, linkSecret: string) => SandboxSpec
  /** Connects a runtime to its freshly started agent and installs the link. */
  connect: (runtime: SandboxRuntime) => Promise<AgentLink>
}

/** Puts sandboxes to sleep and wakes them. */
export class SandboxHibernation {
  readonly #o: SandboxHibernationOptions

  /** Binds hibernation to the runner's snapshots and drivers. */
  constructor(options: SandboxHibernationOptions) {
    this.#o = options
  }

  #driver(runtime: SandboxRuntime): SandboxDriver {
    const driver = this.#o.drivers.get(runtime.record.driver)
    if (!driver)
      throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} has no driver on this runner`)
    return driver
  }

  /**
   * Snapshots a sandbox, then stops its agent and deletes its workspace. With `abortIf`, asked
   * once the snapshot is taken, a sandbox used meanwhile stays awake and the snapshot is
   * deleted; returns whether it hibernated. A live snapshot (gVisor) checkpoints the sandbox,
   * which stops it, so it hibernates whatever `abortIf` says.
   */
  async hibernate(runtime: SandboxRuntime, options: { abortIf?: () => boolean } = {}): Promise<boolean> {
    const { snapshots, store } = this.#o
    const link = await runtime.link()
    const driver = this.#driver(runtime)
    const handle = runtime.handle
    const live = snapshots.isLive(driver)
    // Live: requests wait while the sandbox is checkpointed. A checkpoint the store refused
    // (over --max-snapshot-bytes) stopped the sandbox, so it goes on from its image in place.
    const state = live
      ? await runtime.hibernating(() =>
          snapshots.hibernate(runtime.record, link, driver, handle, {
            suspended: () => runtime.detach(),
            after: async (imageDir, stored) => {
              if (!stored && imageDir !== null) await this.#resumeInPlace(runtime, driver, handle, imageDir)
            },
          }),
        )
      : await snapshots.hibernate(runtime.record, link, driver, handle)
    if (!live && options.abortIf?.() === true) {
      await snapshots.dropHibernation({ ...runtime.record, driverState: state })
      return false
    }
    await runtime.hibernating(async () => {
      runtime.detach()
      runtime.keptProcesses.clear()
      await driver.destroy(handle)
      runtime.record.driverState = state
      runtime.record.status = 'hibernated'
      runtime.record.deadReason = null
      store.setDriverState(runtime.id, state)
      store.setSandboxStatus(runtime.id, 'hibernated')
    })
    this.#o.logger.info({ sandboxId: runtime.id }, 'sandbox hibernated')
    return true
  }

  /** Restores a sandbox from the checkpoint image it was just stopped by, with its own link secret. */
  async #resumeInPlace(
    runtime: SandboxRuntime,
    driver: SandboxDriver,
    handle: DriverSandbox,
    imageDir: string,
  ): Promise<void> {
    const spec = this.#o.specOf(runtime.record, linkSecretOf(handle))
    const started = await driver.restoreAgent!(handle, spec, imageDir)
    runtime.record.driverState = started.state
    this.#o.store.setDriverState(runtime.id, started.state)
    await this.#o.connect(runtime)
  }

  /** Wakes a hibernated sandbox: the same id, a new agent, its workspace and shells restored, processes restarted. */
  async wake(runtime: SandboxRuntime): Promise<AgentLink> {
    const { snapshots, store } = this.#o
    const { record } = runtime
    const driver = this.#driver(runtime)
    const manifest = snapshots.hibernation(record)
    const spec = this.#o.specOf(record, mintLinkSecret())
    const handle = await driver.create(spec)
    let current = handle
    try {
      await snapshots.restoreWorkspace(manifest, driver, handle)
      // A live image on its own driver is restored: its processes go on running.
      const live = snapshots.restoresLive(manifest, driver)
      current = live
        ? await snapshots.withLiveImage(manifest, (dir) => driver.restoreAgent!(handle, spec, dir))
        : await driver.startAgent(handle, spec)
      const started = current
      record.driverState = started.state
      store.setDriverState(record.id, started.state)
      const link = await this.#o.connect(runtime)
      runtime.restoredFrom = live
        ? await snapshots.liveRestored(manifest, link)
        : await snapshots.restoreShells(manifest, link, true)
      await snapshots.store.delete(manifest.id)
      this.#o.logger.info({ sandboxId: runtime.id }, 'sandbox woke from hibernation')
      return link
    } catch (error) {
      // Back to hibernating: the snapshot is still there for the next attempt.
      runtime.detach()
      await driver.destroy(current).catch(() => {})
      record.driverState = { hibernatedFrom: manifest.id }
      record.status = 'hibernated'
      store.setDriverState(record.id, record.driverState)
      store.setSandboxStatus(record.id, 'hibernated')
      throw error
    }
  }
}
