// What the shell sockets of one runner share about each session: how many sockets are open on
// it, and which run ids are in flight on it and for which socket. The agent knows a run only by
// its id within the session, so two sockets that picked the same id would share one run: the
// second command would never run and its client would read the first one's output. A run keeps
// its client's id on the agent link, so a client that reconnects finds its runs by id in the
// replay, unless that id is already in flight in the session; then the run gets a runner-made
// id (claimed here too, so it collides with nothing) and its socket maps it back.
import { RunnerError } from './runner-error.ts'

/** Claims kept per session at most; the oldest go first (they belong to long-gone sockets). */
const MAX_CLAIMS_PER_SESSION = 4_096

/** Sessions without sockets whose claims are kept at most. */
const MAX_IDLE_SESSIONS = 4_096

interface SessionEntry {
  sockets: number
  /** Agent run id → the socket that sent it, or null once that socket has gone. */
  claims: Map<string, object | null>
}

/** Socket counts and in-flight run ids per session, shared by the runner's shell sockets. */
export class ShellSessionRegistry {
  readonly #sessions = new Map<string, SessionEntry>()
  #seq = 0
  #lastSandbox = ''
  #lastSession = ''
  #lastKey = '\0'

  /**
   * The map key of a session. The last one is kept: a run's claim and release ask for the same
   * session, and a kept key is neither built nor hashed again.
   */
  #key(sandboxId: string, sessionId: string): string {
    if (sandboxId !== this.#lastSandbox || sessionId !== this.#lastSession) {
      this.#lastSandbox = sandboxId
      this.#lastSession = sessionId
      this.#lastKey = `${sandboxId}\0${sessionId}`
    }
    return this.#lastKey
  }

  #entry(sandboxId: string, sessionId: string): SessionEntry {
    const key = this.#key(sandboxId, sessionId)
    let entry = this.#sessions.get(key)
    if (!entry) {
      entry = { sockets: 0, claims: new Map() }
      this.#sessions.set(key, entry)
    }
    return entry
  }

  /**
   * Forgets a session no socket uses and no run holds. A session whose sockets have all gone
   * while its runs went on moves to the back of the map; past MAX_IDLE_SESSIONS the front ones
   * (idle longest, most likely deleted) are forgotten.
   */
  #prune(sandboxId: string, sessionId: string, entry: SessionEntry): void {
    if (entry.sockets > 0) return
    const key = this.#key(sandboxId, sessionId)
    this.#sessions.delete(key)
    if (entry.claims.size === 0) return
    this.#sessions.set(key, entry)
    if (this.#sessions.size <= MAX_IDLE_SESSIONS) return
    for (const [k, e] of this.#sessions) {
      if (this.#sessions.size <= MAX_IDLE_SESSIONS) break
      if (e.sockets === 0) this.#sessions.delete(k)
    }
  }

  /** Shell sockets open on a session. */
  sockets(sandboxId: string, sessionId: string): number {
    return this.#sessions.get(this.#key(sandboxId, sessionId))?.sockets ?? 0
  }

  /** Counts a socket on a session and returns its release; throws RATE_LIMITED at `max`. */
  openSocket(sandboxId: string, sessionId: string, max: number): () => void {
    const entry = this.#entry(sandboxId, sessionId)
    if (entry.sockets >= max) {
      throw new RunnerError(
        'RATE_LIMITED',
        `session ${sessionId} of sandbox ${sandboxId} already has ${entry.sockets} shell sockets open (the limit is ${max})`,
        { details: { limit: max, value: entry.sockets } },
      )
    }
    entry.sockets += 1
    let open = true
    return () => {
      if (!open) return
      open = false
      entry.sockets -= 1
      this.#prune(sandboxId, sessionId, entry)
    }
  }

  /** Claims an id on the agent link for `owner`'s run `clientId`: that id when it is free, else a new one. */
  claimRun(sandboxId: string, sessionId: string, clientId: string, owner: object): string {
    const { claims } = this.#entry(sandboxId, sessionId)
    let runId = clientId
    while (claims.has(runId)) {
      this.#seq += 1
      runId = `~r${this.#seq}`
    }
    if (claims.size >= MAX_CLAIMS_PER_SESSION) {
      const oldest = claims.keys().next().value
      if (oldest !== undefined) claims.delete(oldest)
    }
    claims.set(runId, owner)
    return runId
  }

  /** Notes a run that is in flight in the session but was sent by no socket of this runner. */
  noteForeignRun(sandboxId: string, sessionId: string, runId: string): void {
    const { claims } = this.#entry(sandboxId, sessionId)
    if (!claims.has(runId)) claims.set(runId, null)
  }

  /**
   * Ends the claim on `runId` after its exit was seen or its call failed. `by` is the socket that
   * saw it: an owner ends only its own claims, any socket the claims of sockets that have gone.
   */
  releaseRun(sandboxId: string, sessionId: string, runId: string, by: object): void {
    const entry = this.#sessions.get(this.#key(sandboxId, sessionId))
    // A claim holds an owner or null; undefined is no claim.
    const owner = entry?.claims.get(runId)
    if (entry === undefined || owner === undefined || (owner !== by && owner !== null)) return
    entry.claims.delete(runId)
    this.#prune(sandboxId, sessionId, entry)
  }

  /** Hands a socket's claims over to no one: its runs go on in the agent after it closes. */
  detach(sandboxId: string, sessionId: string, owner: object): void {
    const entry = this.#sessions.get(this.#key(sandboxId, sessionId))
    if (!entry) return
    for (const [run, o] of entry.claims) if (o === owner) entry.claims.set(run, null)
  }

  /** The session has nothing running or queued: claims of sockets that have gone are stale. */
  dropDetached(sandboxId: string, sessionId: string): void {
    const entry = this.#sessions.get(this.#key(sandboxId, sessionId))
    if (!entry) return
    for (const [run, owner] of entry.claims) if (owner === null) entry.claims.delete(run)
    this.#prune(sandboxId, sessionId, entry)
  }
}
