// The snapshot service (sandbox-snapshots.ts) as the sandbox manager reaches it. A runner may
// have none (built without a snapshot store): then every path that needs one (a snapshot, a
// fork, hibernation, waking) refuses with the same message. It also holds what the manager does
// around a snapshot: a live snapshot (gVisor) stops the sandbox, so the sandbox is started again
// in place from its image and reconnected; and hibernation (sandbox-hibernation.ts), built on
// first use. Both restart agents with `specOf`: the sandbox's stored settings and a new secret.
import type { SnapshotInfo } from '@conch/protocol'
import type { FastifyBaseLogger as Logger } from 'fastify'
import { type AgentConnector, CONNECT_TIMEOUT_MS } from './agent-connector.ts'
import { linkSecretOf, type SandboxDriver, type SandboxSpec } from './drivers/sandbox-driver.ts'
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'
import { SandboxHibernation } from './sandbox-hibernation.ts'
import type { SandboxRuntime } from './sandbox-runtime.ts'
import type { SandboxSnapshots } from './sandbox-snapshots.ts'
import type { SandboxRecord, StateStore } from './state-store.ts'

/** What snapshot access needs. */
export interface SnapshotAccessOptions {
  /** Snapshots and forks; absent on a runner without a snapshot store. */
  snapshots: SandboxSnapshots | undefined
  /** Drivers by name. */
  drivers: ReadonlyMap<string, SandboxDriver>
  /** Durable state. */
  store: StateStore
  /** Limits (`scrollbackBytes`, `maxSessionsPerSandbox`). */
  limits: Pick<RunnerLimits, 'scrollbackBytes' | 'maxSessionsPerSandbox'>
  /** Logger. */
  logger: Logger
  /** Connects runtimes to restarted agents and marks the ones that did not come back dead. */
  connector: AgentConnector
}

/** The manager's way to the snapshot service: snapshots of sandboxes, hibernation, the refusal without one. */
export class SnapshotAccess {
  readonly #o: SnapshotAccessOptions
  #hibernator: SandboxHibernation | null = null

  /** Binds snapshot access to the runner's snapshot service (if any) and drivers. */
  constructor(options: SnapshotAccessOptions) {
    this.#o = options
  }

  /** Whether the runner keeps snapshots. */
  get available(): boolean {
    return this.#o.snapshots !== undefined
  }

  /** The snapshot service; with `required`, a runner without one refuses with a message. */
  service(required: boolean): SandboxSnapshots | undefined {
    if (this.#o.snapshots === undefined && required) {
      throw new RunnerError(
        'BAD_REQUEST',
        'this runner keeps no snapshots (it was built without a snapshot store); start it with `conch runner`, which keeps them in its state dir.',
      )
    }
    return this.#o.snapshots
  }

  /** Snapshots a sandbox: every open shell's state, its workspace and its settings. */
  async snapshot(runtime: SandboxRuntime, name: string | null): Promise<SnapshotInfo> {
    const snapshots = this.service(true)!
    const driver = this.#o.drivers.get(runtime.record.driver)
    const link = await runtime.link()
    if (!driver)
      throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${runtime.id} has no driver on this runner`)
    const handle = runtime.handle
    if (!snapshots.isLive(driver)) return snapshots.take(runtime.record, link, driver, handle, name)
    // Live: requests wait while the sandbox is checkpointed, then restored in place from its image.
    return runtime.hibernating(() =>
      snapshots.take(runtime.record, link, driver, handle, name, {
        suspended: () => runtime.detach(),
        after: async (imageDir) => {
          if (imageDir === null) {
            // A checkpoint that failed in gVisor stopped the sandbox; one refused before it
            // (the agent did not suspend in time) left it running, with its link handed back.
            const alive = await driver.isAlive(handle)
            if (alive.alive) await this.#o.connector.connect(runtime, CONNECT_TIMEOUT_MS)
            else
              this.#o.connector.markDead(runtime, `its live snapshot failed and stopped it (${alive.reason})`)
            return
          }
          const spec = this.#specOf(runtime.record, linkSecretOf(handle))
          const started = await driver.restoreAgent!(handle, spec, imageDir)
          runtime.record.driverState = started.state
          this.#o.store.setDriverState(runtime.id, started.state)
          await this.#o.connector.connect(runtime, CONNECT_TIMEOUT_MS)
        },
      }),
    )
  }

  /** Hibernation, on a runner that keeps snapshots; a runner without refuses with a message. */
  hibernation(): SandboxHibernation {
    const snapshots = this.service(true)!
    this.#hibernator ??= new SandboxHibernation({
      snapshots,
      drivers: this.#o.drivers,
      store: this.#o.store,
      logger: this.#o.logger,
      specOf: (record, linkSecret) => this.#specOf(record, linkSecret),
      connect: (runtime) => this.#o.connector.connect(runtime, CONNECT_TIMEOUT_MS),
    })
    return this.#hibernator
  }

  /** The spec a sandbox is started again with (wake, live restore): its settings and `linkSecret`. */
  #specOf(record: SandboxRecord, linkSecret: string): SandboxSpec {
    return {
      id: record.id,
      env: record.env,
      limits: record.limits,
      scrollbackBytes: this.#o.limits.scrollbackBytes,
      maxSessions: this.#o.limits.maxSessionsPerSandbox,
      linkSecret,
    }
  }
}
