// The sandbox's shell sessions, behind the `session.*` methods of the agent protocol.
//
// Model: a map from session id to one `BashSession`. `default` is created on demand and
// cannot be deleted while its shell is open; a run naming an unknown session creates it with
// defaults. A closed session stays listed (status `closed`) until deleted, and its runs fail
// with SHELL_CLOSED. Attaching a channel replays the session's output log from an offset and
// then forwards live events, pausing the shell's output while the channel has no credit.
// State queries (env, aliases, cwd) are internal runs (session-state-queries.ts).
import { randomBytes } from 'node:crypto'
import type { CallAnswer } from '@conch/link'
import type { AgentParams, AgentResultOf, RunResult, SessionInfo, SessionOptions } from '@conch/protocol'
import { clampTimeout, DEFAULT_SESSION_ID, LIMITS } from '@conch/protocol/zod-free'
import { AgentError } from './agent-error.ts'
import { BashSession } from './bash-session.ts'
import type { Clock } from './clock.ts'
import type { Logger } from './logger.ts'
import type { OomCheck } from './oom-check.ts'
import type { ProcessTable } from './process-tree.ts'
import type { ScrollbackBudget } from './scrollback-budget.ts'
import { attachChannel } from './session-attach.ts'
import { buildSessionEnv } from './session-env.ts'
import { type RunOutcome, runRequest } from './session-run.ts'
import type { Broadcast, MethodContext, SessionMethod, SessionService } from './session-service.ts'
import { SessionStateQueries } from './session-state-queries.ts'
import { type ShellShape, SpareShell } from './spare-shell.ts'
import type { Spawn } from './spawner.ts'

/** How the session manager is built. */
export interface SessionManagerOptions {
  /** The sandbox's base environment (never the host's). */
  baseEnv: Readonly<Record<string, string>>
  /** The workspace root, where sessions start by default. */
  root: string
  /** Maps a caller's directory (`/workspace/x`, relative) to a path in the sandbox. */
  resolveDir: (dir: string) => string
  /** Process creation. */
  spawn: Spawn
  /** Time. */
  clock: Clock
  /** Logging. */
  logger: Logger
  /** /proc access. */
  processTable: ProcessTable
  /** Where sessions keep their command files. */
  tempRoot: string
  /** The sandbox user's gid when shells run as another user than the agent. */
  sandboxGid?: number
  /** Output kept per session for reattach. */
  scrollbackBytes?: number
  /** The agent-wide bound on all scrollback together. */
  scrollbackBudget?: ScrollbackBudget
  /** Most sessions at once. */
  maxSessions?: number
  /** Largest timeout a session default may have. */
  maxCommandTimeoutMs?: number
  /** Time between the signals of a timeout. */
  killGraceMs?: number
  /** The bash binary. */
  bashPath?: string
  /** Tells whether a run's exit code was the sandbox's memory limit. */
  oomCheck?: OomCheck
}

/**
 * Handles one `session.*` method: params parsed against its schema, result typed by it (or a
 * promise of it, when the handler has to wait).
 */
type SessionHandler<M extends SessionMethod> = (
  params: AgentParams<M>,
  context: MethodContext,
) => CallAnswer<AgentResultOf<M>>

/** What a queued streamed run's settlement does: its output and exit flow on attached channels. */
const IGNORE = (): void => {}

/** Every shell session of the sandbox. */
export class SessionManager implements SessionService {
  readonly #opts: SessionManagerOptions
  readonly #sessions = new Map<string, BashSession>()
  /** A shell started ahead of demand with the default options (`prepareSpare`). */
  readonly #spare = new SpareShell()
  #broadcast: Broadcast = () => {}
  readonly #queries = new SessionStateQueries()

  /** Creates an empty manager; `default` appears on first use. */
  constructor(options: SessionManagerOptions) {
    this.#opts = options
  }

  /** Where to send `session_closed` frames. */
  setBroadcast(broadcast: Broadcast): void {
    this.#broadcast = broadcast
  }

  /** A session by id: `default` is created on demand, and with `create` any unknown id is. */
  async get(id: string, create = false): Promise<BashSession> {
    const found = this.#sessions.get(id)
    if (found !== undefined) return found
    if (id === DEFAULT_SESSION_ID || create) return this.create({ id })
    throw new AgentError('SESSION_NOT_FOUND', `session "${id}" does not exist`, {
      details: { sessionId: id },
    })
  }

  /** Every session, open or closed, in creation order. */
  all(): BashSession[] {
    return [...this.#sessions.values()]
  }

  /** Starts a new shell. */
  async create(options: SessionOptions): Promise<BashSession> {
    const o = this.#opts
    const id = options.id ?? `s-${randomBytes(6).toString('hex')}`
    if (this.#sessions.has(id)) {
      throw new AgentError('SESSION_EXISTS', `session "${id}" already exists`, {
        details: {
          sessionId: id,
        },
      })
    }
    const max = o.maxSessions ?? LIMITS.maxSessionsPerSandbox
    if (this.#sessions.size >= max) {
      throw new AgentError(
        'TOO_MANY_SESSIONS',
        `this sandbox already has ${this.#sessions.size} sessions (the limit is ${max})`,
        { details: { limit: max, value: this.#sessions.size } },
      )
    }
    const cleanEnv = options.cleanEnv ?? false
    const shape: ShellShape = {
      env: buildSessionEnv(o.baseEnv, cleanEnv, options.env),
      cwd: options.cwd === undefined ? o.root : o.resolveDir(options.cwd),
      cleanEnv,
      commandTimeoutMs: clampTimeout(
        options.commandTimeoutMs,
        LIMITS.defaultCommandTimeoutMs,
        o.maxCommandTimeoutMs ?? LIMITS.maxCommandTimeoutMs,
      ),
    }
    const session = this.#spare.take(id, shape) ?? this.#startShell(id, shape)
    this.#sessions.set(id, session)
    void session.closed.then((info) => {
      this.#broadcast({ type: 'session_closed', sessionId: id, ...info })
    })
    await session.ready.catch(() => {})
    return session
  }

  /** Handles one `session.*` call with parsed params: its result, or a promise of it. */
  handle<M extends SessionMethod>(
    method: M,
    params: AgentParams<M>,
    context: MethodContext,
  ): CallAnswer<AgentResultOf<M>> {
    const handler = this.#handlers[method] as unknown as SessionHandler<M>
    return handler(params, context)
  }

  /** One handler per `session.*` method, each typed by its method's params and result schemas. */
  readonly #handlers: { [M in SessionMethod]: SessionHandler<M> } = {
    'session.create': async (p) => info(await this.create(p)),
    'session.list': async () => {
      await this.get(DEFAULT_SESSION_ID)
      return { sessions: [...this.#sessions.values()].map(info) }
    },
    'session.get': async (p) => info(await this.get(p.sessionId)),
    'session.delete': async (p) => {
      await this.delete(p.sessionId)
      return {}
    },
    'session.run': (p) => {
      const session = this.#sessions.get(p.sessionId)
      // A streamed run of an existing session is queued (its line written into bash) and
      // answered in this turn, with no promise on the way; its output and exit flow on attached
      // channels, and a run the shell cannot take (closed, invalid) fails the call.
      if (session !== undefined && !p.buffer) {
        session.enqueue(runRequest(p, 0), IGNORE, IGNORE)
        return {}
      }
      return this.#runBuffered(p, session)
    },
    'session.attach': async (p, context) => {
      const session = await this.get(p.sessionId)
      attachChannel(session, context.channel(p.ch), p.offset)
      return info(session)
    },
    'session.stdin': async (p) => {
      const session = await this.get(p.sessionId)
      session.writeStdin(
        p.id,
        p.data === undefined ? undefined : Buffer.from(p.data, 'base64'),
        p.end === true,
      )
      return {}
    },
    'session.interrupt': async (p) => {
      const session = await this.get(p.sessionId)
      session.interrupt(p.id)
      return {}
    },
    'session.env.list': async (p) => ({ env: await this.#queries.env(await this.get(p.sessionId)) }),
    'session.env.get': async (p) => {
      const env = await this.#queries.env(await this.get(p.sessionId))
      return { value: Object.hasOwn(env, p.name) ? env[p.name]! : null }
    },
    'session.env.set': async (p) => {
      if (p.value.includes('\0')) {
        throw new AgentError(
          'BAD_REQUEST',
          `the value of ${p.name} contains a NUL byte, which bash cannot hold.`,
        )
      }
      await this.#queries.setEnv(await this.get(p.sessionId), p.name, p.value)
      return {}
    },
    'session.env.unset': async (p) => {
      await this.#queries.unsetEnv(await this.get(p.sessionId), p.name)
      return {}
    },
    'session.alias.list': async (p) => ({
      aliases: await this.#queries.aliases(await this.get(p.sessionId)),
    }),
    'session.alias.add': async (p) => {
      await this.#queries.addAlias(await this.get(p.sessionId), p.name, p.value)
      return {}
    },
    'session.alias.remove': async (p) => {
      await this.#queries.removeAlias(await this.get(p.sessionId), p.name)
      return {}
    },
    'session.history': async (p) => {
      const session = await this.get(p.sessionId)
      return {
        entries: session.history({
          ...(p.prefix === undefined ? {} : { prefix: p.prefix }),
          ...(p.contains === undefined ? {} : { contains: p.contains }),
          ...(p.limit === undefined ? {} : { limit: p.limit }),
        }),
      }
    },
    'session.history.replay': async (p) => {
      const session = await this.get(p.sessionId)
      const entry = session.historyEntry(p.index)
      if (entry === null) {
        throw new AgentError('HISTORY_NOT_FOUND', `session "${p.sessionId}" has no history entry ${p.index}`)
      }
      return toRunResult(
        await session.run({
          runId: p.id,
          command: entry.command,
          ...(p.outputCapBytes === undefined ? {} : { outputCapBytes: p.outputCapBytes }),
        }),
      )
    },
  }

  /**
   * A `session.run` that waits: a buffered run (resolves with its result), or a streamed run of a
   * session that does not exist yet (created with defaults first).
   */
  async #runBuffered(
    p: AgentParams<'session.run'>,
    found: BashSession | undefined,
  ): Promise<AgentResultOf<'session.run'>> {
    const session = found ?? (await this.get(p.sessionId, true))
    if (!p.buffer) {
      session.enqueue(runRequest(p, 0), IGNORE, IGNORE)
      return {}
    }
    return toRunResult(await session.run(runRequest(p, p.outputCapBytes)))
  }

  /** Deletes a session and kills its processes; `default` only once its shell has closed. */
  async delete(id: string): Promise<void> {
    const session = this.#sessions.get(id)
    if (session === undefined) {
      throw new AgentError('SESSION_NOT_FOUND', `session "${id}" does not exist`, {
        details: {
          sessionId: id,
        },
      })
    }
    if (id === DEFAULT_SESSION_ID && session.closedInfo === null) {
      throw new AgentError(
        'SESSION_PROTECTED',
        'the "default" session cannot be deleted while its shell is open',
        { details: { sessionId: id } },
      )
    }
    this.#sessions.delete(id)
    await session.dispose()
    session.log.release()
  }

  /** The cwd and exported variables of a session's shell. */
  async shellState(sessionId: string): Promise<{ cwd: string; env: Record<string, string> }> {
    return this.#queries.shellState(await this.get(sessionId))
  }

  /**
   * Starts the spare shell (spare-shell.ts) with the default options: the sandbox's environment,
   * the workspace, the default timeout. The first `create` that would start the same shell takes it.
   */
  prepareSpare(): void {
    if (this.#spare.held) return
    const o = this.#opts
    const shape: ShellShape = {
      env: buildSessionEnv(o.baseEnv, false),
      cwd: o.root,
      cleanEnv: false,
      commandTimeoutMs: clampTimeout(
        undefined,
        LIMITS.defaultCommandTimeoutMs,
        o.maxCommandTimeoutMs ?? LIMITS.maxCommandTimeoutMs,
      ),
    }
    this.#spare.hold(this.#startShell(`s-${randomBytes(6).toString('hex')}`, shape), shape)
  }

  /** bash's pid in the spare shell, while there is one. */
  get sparePid(): number | null {
    return this.#spare.pid
  }

  #startShell(id: string, shape: ShellShape): BashSession {
    const o = this.#opts
    return new BashSession({
      id,
      ...shape,
      spawn: o.spawn,
      clock: o.clock,
      logger: o.logger,
      processTable: o.processTable,
      tempRoot: o.tempRoot,
      ...(o.sandboxGid === undefined ? {} : { sandboxGid: o.sandboxGid }),
      ...(o.scrollbackBytes === undefined ? {} : { scrollbackBytes: o.scrollbackBytes }),
      ...(o.scrollbackBudget === undefined ? {} : { scrollbackBudget: o.scrollbackBudget }),
      ...(o.killGraceMs === undefined ? {} : { killGraceMs: o.killGraceMs }),
      ...(o.bashPath === undefined ? {} : { bashPath: o.bashPath }),
      ...(o.oomCheck === undefined ? {} : { oomCheck: o.oomCheck }),
    })
  }

  /** Ends every shell, the spare's included. */
  async closeAll(): Promise<void> {
    const sessions = [...this.#sessions.values()]
    this.#sessions.clear()
    const spare = this.#spare.release()
    if (spare !== null) sessions.push(spare)
    await Promise.all(sessions.map((s) => s.dispose('agent shut down')))
    for (const s of sessions) s.log.release()
  }
}

/** A session as the protocol reports it. */
export function info(session: BashSession): SessionInfo {
  return {
    id: session.id,
    status: session.closedInfo === null ? 'open' : 'closed',
    cwd: session.cwd,
    commandTimeoutMs: session.commandTimeoutMs,
    cleanEnv: session.cleanEnv,
    pid: session.pid,
    createdAt: Math.floor(session.createdAt),
    offset: session.log.endOffset,
    running: session.running,
    queued: session.queued,
    closed: session.closedInfo,
  }
}

/** A run's outcome as the protocol's buffered result (base64). */
export function toRunResult(out: RunOutcome): RunResult {
  return {
    stdout: out.stdout.toString('base64'),
    stderr: out.stderr.toString('base64'),
    encoding: 'base64',
    exitCode: out.exitCode,
    timedOut: out.timedOut,
    truncated: out.truncated,
    stdoutBytes: out.stdoutBytes,
    stderrBytes: out.stderrBytes,
    durationMs: out.durationMs,
    ...(out.oomKilled ? { oomKilled: true } : {}),
  }
}
