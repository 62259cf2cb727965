// The runs one shell socket's client has in flight. Run ids are the client's, scoped to its
// socket: the shell session registry gives each run an id on the agent link that no other run
// in flight in the session has, and frames carry the client's id back. Another socket's run
// whose id equals one of this client's runs in flight is not shown under that id.
import type { ShellSessionRegistry } from './shell-session-registry.ts'

/** One of the client's runs in flight. */
export interface OwnRun {
  /** The id the client gave the run. */
  clientId: string
  /** Its id on the agent link. */
  runId: string
  /** When the runner sent it (performance.now()). */
  started: number
}

/** The client's runs in flight on one socket, by link id and by client id. */
export class ShellClientRuns {
  readonly #sessions: ShellSessionRegistry
  readonly #sandboxId: string
  readonly #owner: object
  /** Frees one run's slot in the sandbox's queue (called once per run, when it is forgotten). */
  readonly #releaseSlot: () => void
  /** The session, once attached. */
  sessionId: string | null = null
  /** This client's runs in flight, by their id on the agent link. */
  readonly #runs = new Map<string, OwnRun>()
  /**
   * The link id of each of this client's runs in flight whose link id is not its own id (the
   * registry gave it another), by the client's id. A run keeps its client's id almost always,
   * so the common run costs one map entry, not two.
   */
  readonly #renamed = new Map<string, string>()

  /**
   * The runs of `owner` (the connection) on a session of sandbox `sandboxId`; each claimed run
   * holds a slot of the sandbox's queue, which `releaseSlot` frees once the run is forgotten.
   */
  constructor(sessions: ShellSessionRegistry, sandboxId: string, owner: object, releaseSlot: () => void) {
    this.#sessions = sessions
    this.#sandboxId = sandboxId
    this.#owner = owner
    this.#releaseSlot = releaseSlot
  }

  /** The link id of the client's run `clientId` in flight, if it is. */
  linkId(clientId: string): string | undefined {
    if (this.#runs.get(clientId)?.clientId === clientId) return clientId
    return this.#renamed.size === 0 ? undefined : this.#renamed.get(clientId)
  }

  /**
   * Claims a link id for the client's new run `clientId`, which holds a queue slot the caller
   * took, and records it.
   */
  claim(clientId: string): OwnRun {
    const runId = this.#sessions.claimRun(this.#sandboxId, this.sessionId!, clientId, this.#owner)
    const run: OwnRun = { clientId, runId, started: performance.now() }
    this.#runs.set(runId, run)
    if (runId !== clientId) this.#renamed.set(clientId, runId)
    return run
  }

  /** This client's run whose link id is `run`, if it is one of its runs in flight. */
  own(run: string): OwnRun | undefined {
    return this.#runs.get(run)
  }

  /**
   * The id under which this client sees the run `run` of the agent link: its own id for its
   * own runs, the link id for other clients' runs, and null for output of another client's run
   * whose id this client is using for a run in flight (its start and exit are not shown).
   */
  shownId(run: string | null): string | null {
    if (run === null) return null
    const own = this.#runs.get(run)
    if (own) return own.clientId
    // A run in flight under client id `run` has link id `run` (found above) or is renamed.
    return this.#renamed.size !== 0 && this.#renamed.has(run) ? null : run
  }

  /**
   * Ends this client's run `runId` (link id): frees its queue slot and its id; undefined if not
   * its own. `own` is the run when the caller already looked it up (`own(runId)`).
   */
  forget(runId: string, own: OwnRun | undefined = this.#runs.get(runId)): OwnRun | undefined {
    if (!own || !this.#runs.delete(runId)) return undefined
    if (own.clientId !== runId) this.#renamed.delete(own.clientId)
    this.#releaseSlot()
    if (this.sessionId) this.#sessions.releaseRun(this.#sandboxId, this.sessionId, runId, this.#owner)
    return own
  }

  /** Another client's run `runId` ended: frees its link id. */
  releaseForeign(runId: string): void {
    if (this.sessionId) this.#sessions.releaseRun(this.#sandboxId, this.sessionId, runId, this.#owner)
  }

  /** Ends every run (the shell closed); `each` is called once per run. */
  forgetAll(each: () => void): void {
    for (const runId of [...this.#runs.keys()]) {
      this.forget(runId)
      each()
    }
  }

  /**
   * The socket went away: frees every run's queue slot, while the runs go on in the agent with
   * their ids still claimed, now for no socket; `each` is called once per run.
   */
  detach(each: () => void): void {
    if (this.sessionId) this.#sessions.detach(this.#sandboxId, this.sessionId, this.#owner)
    for (let n = this.#runs.size; n > 0; n--) {
      this.#releaseSlot()
      each()
    }
    this.#runs.clear()
    this.#renamed.clear()
  }
}
