// Test fixture: a runner app on a fresh temp state dir with the real local driver and a known
// API key. `await using` closes the app, stops every agent it started and removes the dir.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type BuildAppOptions, buildApp, type RunnerApp } from '../src/app.ts'
import { generateApiKey, hashSecret } from '../src/credentials.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import type { SandboxDriver } from '../src/drivers/sandbox-driver.ts'
import { defaultLimits, type RunnerLimitsInput } from '../src/runner-limits.ts'
import { SnapshotStore } from '../src/snapshots/snapshot-store.ts'
import { StateStore } from '../src/state-store.ts'

/** A runner under test. */
export interface TestRunner extends AsyncDisposable {
  /** The app (inject, or listen on port 0). */
  app: RunnerApp
  /** The API key it accepts. */
  apiKey: string
  /** Its state dir. */
  stateDir: string
  /** Authorization headers for the API key. */
  auth: { authorization: string }
  /** The driver it uses. */
  driver: SandboxDriver
}

/** Options of a test runner. */
export interface TestRunnerOptions {
  /** Limits to override. */
  limits?: RunnerLimitsInput
  /** Reuse this state dir (restart tests). */
  stateDir?: string
  /** Clock. */
  now?: () => number
  /** Listen on 127.0.0.1 port 0. */
  listen?: boolean
  /** Keep agents running at dispose (the test stops them). */
  keepAgents?: boolean
  /** A driver to use instead of the local driver (named `local`). */
  driver?: SandboxDriver
  /** More drivers beside it (a create request picks one by name). */
  extraDrivers?: SandboxDriver[]
  /** Remove a given `stateDir` at dispose too. */
  removeStateDir?: boolean
  /** Origins allowed to call the REST API from a browser. */
  corsOrigins?: readonly string[]
  /** fastify logger options (none by default). */
  logger?: BuildAppOptions['logger']
  /** Port exposure settings. */
  network?: BuildAppOptions['network']
  /** Warm pool size per driver (0, none, by default). */
  warmPool?: number
  /** Memory the host has available, as the warm pool sees it. */
  availableMemoryBytes?: () => number
  /** Keep snapshots in the state dir (snapshots, forks, hibernation). */
  snapshots?: boolean
}

/**
 * Starts a runner on a temp state dir. The dir it made (or a given one, with `removeStateDir`)
 * is removed when the start fails and at dispose, also when closing or destroying throws;
 * disposing twice does the work once.
 */
export async function startRunner(options: TestRunnerOptions = {}): Promise<TestRunner> {
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'conch-r-'))
  const removeStateDir = (): void => {
    if (!options.stateDir || options.removeStateDir) rmSync(stateDir, { recursive: true, force: true })
  }
  const apiKey = generateApiKey()
  let store: StateStore
  try {
    store = StateStore.open(stateDir)
  } catch (error) {
    removeStateDir()
    throw error
  }
  const driver = options.driver ?? new LocalDriver({ stateDir })
  const app = buildApp({
    store,
    apiKeyHashes: [hashSecret(apiKey)],
    drivers: [driver, ...(options.extraDrivers ?? [])],
    limits: options.limits,
    now: options.now,
    ...(options.corsOrigins ? { corsOrigins: options.corsOrigins } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.network ? { network: options.network } : {}),
    ...(options.warmPool === undefined ? {} : { warmPool: options.warmPool }),
    ...(options.availableMemoryBytes ? { availableMemoryBytes: options.availableMemoryBytes } : {}),
    ...(options.snapshots
      ? { snapshotStore: new SnapshotStore(stateDir, defaultLimits(options.limits)) }
      : {}),
  })
  // Every step runs even when one before it throws, so one sandbox that fails to stop does not
  // leave the others running; the errors are thrown together at the end.
  const dispose = async (): Promise<void> => {
    const errors: unknown[] = []
    try {
      const sandboxes = app.conch.manager.list()
      await app.close().catch((error: unknown) => errors.push(error))
      if (!options.keepAgents) {
        for (const s of sandboxes) {
          // A hibernated sandbox has nothing running: its driver state names its snapshot.
          if (s.record.status === 'hibernated') continue
          const own = options.extraDrivers?.find((d) => d.name === s.record.driver) ?? driver
          await own
            .destroy({ id: s.id, workdir: s.record.workdir, state: s.record.driverState })
            .catch((error: unknown) => errors.push(error))
        }
      }
    } finally {
      store.close()
      removeStateDir()
    }
    if (errors.length === 1) throw errors[0]
    if (errors.length > 1) throw new AggregateError(errors, 'disposing the test runner failed')
  }
  let disposed: Promise<void> | undefined
  try {
    if (options.listen) await app.listen({ host: '127.0.0.1', port: 0 })
    else await app.ready()
  } catch (error) {
    await app.close().catch(() => {})
    store.close()
    removeStateDir()
    throw error
  }
  return {
    app,
    apiKey,
    stateDir,
    driver,
    auth: { authorization: `Bearer ${apiKey}` },
    [Symbol.asyncDispose]() {
      disposed ??= dispose()
      return disposed
    },
  }
}

/** The base URL of a listening runner. */
export function baseUrl(app: RunnerApp): string {
  const address = app.server.address()
  if (!address || typeof address === 'string') throw new Error('runner is not listening on TCP')
  return `http://127.0.0.1:${address.port}`
}

/** Creates a sandbox through the API and returns its id. */
export async function createSandbox(runner: TestRunner, body: Record<string, unknown> = {}): Promise<string> {
  const res = await runner.app.inject({
    method: 'POST',
    url: '/v1/sandboxes',
    headers: runner.auth,
    payload: body,
  })
  if (res.statusCode !== 200) throw new Error(`create sandbox: ${res.statusCode} ${res.body}`)
  return (res.json() as { id: string }).id
}

/** The shell WebSocket URL of a sandbox on a listening runner. */
export function shellUrl(runner: TestRunner, sandboxId: string, query = ''): string {
  return `${baseUrl(runner.app).replace('http', 'ws')}/v1/sandboxes/${sandboxId}/shell${query}`
}

/** A temp state dir for tests that start more than one runner on it; `using` removes it. */
export function tempStateDir(prefix: string): Disposable & { path: string } {
  const path = mkdtempSync(join(tmpdir(), prefix))
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) }
}
