// Idle sessions: a session a client left (closed its socket, or crashed) stays, so it can be
// reattached; one that nobody comes back to is deleted after its sandbox's
// `sessionIdleTimeoutMs`. A session is idle while no shell socket is attached to it, no command
// runs or waits in it and its output log does not grow; the default session is never deleted.
// Idleness is seen at the runner's checks: a session used between two checks counts as used at
// the later one, so a session is never deleted early, at worst one check late.
import { DEFAULT_SESSION_ID, type SessionInfo } from '@conch/protocol'
import type { FastifyBaseLogger as Logger } from 'fastify'
import type { AgentLink } from './agent-link.ts'
import type { SandboxRuntime } from './sandbox-runtime.ts'
import type { StateStore } from './state-store.ts'

/** Deadline of one agent call of a sweep, so a wedged agent cannot stall every sandbox's sweep. */
export const AGENT_CALL_TIMEOUT_MS = 10_000

/** What the runner last saw of a session. */
interface SessionSeen {
  /** When it was last seen in use. */
  at: number
  /** Its output log's end then; null until the agent was asked. */
  offset: number | null
}

/** What idle sessions need from the runner. */
export interface IdleSessionsOptions {
  /** Durable state: the recorded sessions. */
  store: StateStore
  /** Shell sockets open on a session. */
  sockets: (sandboxId: string, sessionId: string) => number
  /** Logger. */
  logger: Logger
}

/** Tracks when each session was last used and deletes the ones idle past their sandbox's TTL. */
export class IdleSessions {
  readonly #o: IdleSessionsOptions
  /** Sandbox id → session id → what was seen. */
  readonly #seen = new Map<string, Map<string, SessionSeen>>()

  /** Tracks nothing until sessions are noted or swept. */
  constructor(options: IdleSessionsOptions) {
    this.#o = options
  }

  #of(sandboxId: string): Map<string, SessionSeen> {
    let sessions = this.#seen.get(sandboxId)
    if (!sessions) {
      sessions = new Map()
      this.#seen.set(sandboxId, sessions)
    }
    return sessions
  }

  /** Marks a session used at `now` (created, or attached to). */
  touch(sandboxId: string, sessionId: string, now: number): void {
    const sessions = this.#of(sandboxId)
    const seen = sessions.get(sessionId)
    if (seen) seen.at = now
    else sessions.set(sessionId, { at: now, offset: null })
  }

  /** Forgets a sandbox (destroyed). */
  forget(sandboxId: string): void {
    this.#seen.delete(sandboxId)
  }

  /**
   * Deletes the sandbox's sessions idle for its `sessionIdleTimeoutMs` or longer. Asks the agent
   * only when a session may be due; returns the ids deleted.
   */
  async sweep(runtime: SandboxRuntime, link: AgentLink, now: number): Promise<string[]> {
    const ttl = runtime.record.sessionIdleTimeoutMs
    if (ttl === null) return []
    const sessions = this.#of(runtime.id)
    const recorded = new Set(this.#o.store.listSessionIds(runtime.id))
    for (const id of sessions.keys()) if (!recorded.has(id)) sessions.delete(id)
    const due: string[] = []
    for (const id of recorded) {
      if (id === DEFAULT_SESSION_ID) continue
      let seen = sessions.get(id)
      if (!seen) {
        // First seen (a runner restart): its idle time starts now.
        seen = { at: now, offset: null }
        sessions.set(id, seen)
      }
      if (this.#o.sockets(runtime.id, id) > 0) seen.at = now
      else if (now - seen.at >= ttl) due.push(id)
    }
    if (due.length === 0) return []
    const { sessions: live } = await link.call('session.list', {}, { timeoutMs: AGENT_CALL_TIMEOUT_MS })
    const byId = new Map<string, SessionInfo>(live.map((s) => [s.id, s]))
    const deleted: string[] = []
    for (const id of due) {
      const seen = sessions.get(id)
      const info = byId.get(id)
      if (!seen || !info) continue
      const grew = seen.offset !== null && info.offset !== seen.offset
      if (seen.offset === null) seen.offset = info.offset
      if (grew || info.running !== null || info.queued > 0) {
        seen.at = now
        seen.offset = info.offset
        continue
      }
      // A socket may have attached while the agent answered.
      if (this.#o.sockets(runtime.id, id) > 0) continue
      await link.call('session.delete', { sessionId: id }, { timeoutMs: AGENT_CALL_TIMEOUT_MS })
      this.#o.store.deleteSession(runtime.id, id)
      sessions.delete(id)
      deleted.push(id)
      this.#o.logger.info(
        { sandboxId: runtime.id, sessionId: id, sessionIdleTimeoutMs: ttl },
        'deleted idle session',
      )
    }
    return deleted
  }
}
