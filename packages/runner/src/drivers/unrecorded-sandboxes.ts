// Sandboxes a runner made but never recorded. A create takes a sandbox folder, a loop-mounted
// disk and (namespace driver) cgroups and a held process chain before it returns the handle the
// runner stores; a runner killed inside that window leaves them with nothing that names them, and
// they stayed forever (one mount and one loop device each). So each driver writes its handle's
// state into the folder as soon as it has one (`recordCreated`), and a starting runner, before it
// creates anything, destroys every folder under `<state dir>/sandboxes` that no stored sandbox and
// no pooled record names (`reapUnrecorded`, through the driver's `UnrecordedReaper`, which also
// keeps the ids being created out of reach): with that state through the driver's own destroy, or,
// for a folder that died before its state was written (nothing in it ran), by unmounting its disk
// and removing it.
import { lstatSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { GUEST_WORKSPACE } from './namespace-state.ts'
import type { DriverSandbox } from './sandbox-driver.ts'
import { removeDisk } from './workspace-disk.ts'

/** The file in a sandbox folder naming the driver that made it and its handle's state. */
export const CREATED_FILE = 'created.json'

/** What `CREATED_FILE` holds. */
interface CreatedRecord {
  driver: string
  state: Record<string, unknown>
}

/**
 * Writes the handle state of a sandbox being created into its folder (0600, the runner's), with
 * the link secret left out: destroying needs none.
 */
export function recordCreated(dir: string, driver: string, state: { linkSecret?: string }): void {
  const record: CreatedRecord = { driver, state: { ...state, linkSecret: '' } }
  writeFileSync(join(dir, CREATED_FILE), JSON.stringify(record), { mode: 0o600 })
}

/** What a folder's record says, or null when it has none or an unreadable one. */
function readCreated(dir: string): CreatedRecord | null {
  try {
    const parsed: unknown = JSON.parse(readFileSync(join(dir, CREATED_FILE), 'utf8'))
    if (typeof parsed !== 'object' || parsed === null) return null
    const { driver, state } = parsed as Partial<CreatedRecord>
    if (typeof driver !== 'string' || typeof state !== 'object' || state === null) return null
    return { driver, state }
  } catch {
    return null
  }
}

/** How one driver reaps. */
export interface ReapOptions {
  /** The runner's state directory (sandbox folders are in its `sandboxes`). */
  stateDir: string
  /** This driver's name, as `recordCreated` wrote it. */
  driver: string
  /** Ids that are stored or pooled: never touched. */
  known: ReadonlySet<string>
  /** Ids this process is creating right now: never touched. */
  creating: ReadonlySet<string>
  /** The driver's destroy, for a folder with this driver's record. */
  destroy: (sandbox: DriverSandbox) => Promise<void>
}

/**
 * Destroys the unrecorded sandbox folders of one driver (and those with no record, which any
 * driver may remove); returns their ids. A folder another driver recorded is left to it; a
 * symlink or a file is never followed or deleted.
 */
export async function reapUnrecorded(options: ReapOptions): Promise<string[]> {
  const root = join(options.stateDir, 'sandboxes')
  let names: string[]
  try {
    names = readdirSync(root)
  } catch {
    return []
  }
  const reaped: string[] = []
  for (const id of names) {
    if (options.known.has(id) || options.creating.has(id)) continue
    const dir = join(root, id)
    try {
      if (!lstatSync(dir).isDirectory()) continue
    } catch {
      continue
    }
    const record = readCreated(dir)
    if (record !== null && record.driver !== options.driver) continue
    if (record === null) {
      await removeDisk(dir)
      rmSync(dir, { recursive: true, force: true })
    } else {
      await options.destroy({ id, workdir: GUEST_WORKSPACE, state: record.state })
    }
    reaped.push(id)
  }
  return reaped
}

/**
 * One driver's part in reaping: the ids it is creating now, which a reap never touches, and the
 * reap of its unrecorded folders through its own destroy.
 */
export class UnrecordedReaper {
  readonly #stateDir: string
  readonly #driver: string
  readonly #destroy: (sandbox: DriverSandbox) => Promise<void>
  readonly #creating = new Set<string>()

  /** The reaper of driver `driver` (its name, as `recordCreated` writes it) under `stateDir`. */
  constructor(stateDir: string, driver: string, destroy: (sandbox: DriverSandbox) => Promise<void>) {
    this.#stateDir = stateDir
    this.#driver = driver
    this.#destroy = destroy
  }

  /** Runs `create` for sandbox `id`; a reap meanwhile leaves its folder alone. */
  async creating<T>(id: string, create: () => Promise<T>): Promise<T> {
    this.#creating.add(id)
    try {
      return await create()
    } finally {
      this.#creating.delete(id)
    }
  }

  /** Destroys this driver's unrecorded sandboxes (`reapUnrecorded`); ids in `known` are kept. */
  reap(known: ReadonlySet<string>): Promise<string[]> {
    return reapUnrecorded({
      stateDir: this.#stateDir,
      driver: this.#driver,
      known,
      creating: this.#creating,
      destroy: this.#destroy,
    })
  }
}
