import { DEFAULT_SESSION_ID, type SessionInfo } from '@conch/protocol'
import type { FastifyInstance } from 'fastify'
import { randomId } from '../credentials.ts'
import { bindRoutes } from '../route-table.ts'
import {
  bufferedResult,
  checkCommand,
  clampCallTimeout,
  encodeRunResult,
  stdinToBase64,
} from '../run-input.ts'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'
import type { SandboxRuntime } from '../sandbox-manager.ts'

const OK = { ok: true as const }

/** Sessions: create, list, get, delete, buffered runs, interrupt, env, aliases and history. */
export async function sessionsPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  /** Runs a buffered command and records its latency and outcome. */
  async function timedRun<T extends { exitCode: number; timedOut: boolean }>(
    sandbox: SandboxRuntime,
    run: () => Promise<T>,
  ): Promise<T> {
    const release = sandbox.acquireRun(ctx.limits.maxQueuedRunsPerSandbox)
    const started = performance.now()
    try {
      const result = await run()
      ctx.metrics.runs.inc({ via: 'rest', outcome: result.timedOut ? 'timeout' : 'exit' })
      return result
    } catch (error) {
      ctx.metrics.runs.inc({ via: 'rest', outcome: 'error' })
      throw error
    } finally {
      ctx.metrics.runDuration.observe({ via: 'rest' }, (performance.now() - started) / 1000)
      release()
    }
  }

  /** Records a session the agent creates on demand, within the session limit. */
  function noteSession(sandbox: SandboxRuntime, sessionId: string): void {
    if (ctx.store.hasSession(sandbox.id, sessionId)) return
    ctx.manager.checkSessionLimit(sandbox)
    ctx.manager.noteSession(sandbox, sessionId)
  }

  /**
   * The link of the sandbox for a call on session `sessionId`. The agent opens `default` on first
   * use, so a call on it records it (within the session limit) before it is made.
   */
  async function sessionLink(id: string, sessionId: string) {
    const sandbox = ctx.manager.get(id)
    const agent = await sandbox.link()
    if (sessionId === DEFAULT_SESSION_ID) noteSession(sandbox, sessionId)
    return agent
  }

  /**
   * Lists the sessions without opening one. The agent's `session.list` opens `default` when it
   * is missing, which would take a slot (and fail at the limit); so unless the runner has
   * recorded `default`, it asks the agent for each recorded session instead.
   */
  async function listSessions(id: string): Promise<{ sessions: SessionInfo[] }> {
    const sandbox = ctx.manager.get(id)
    const agent = await sandbox.link()
    if (ctx.store.hasSession(sandbox.id, DEFAULT_SESSION_ID)) return agent.call('session.list', {})
    const found = await Promise.all(
      ctx.store.listSessionIds(sandbox.id).map((session) =>
        agent.call('session.get', { sessionId: session }).catch((error: unknown) => {
          if (error instanceof RunnerError && error.code === 'SESSION_NOT_FOUND') return null
          throw error
        }),
      ),
    )
    return { sessions: found.filter((s) => s !== null) }
  }

  bindRoutes(app, {
    createSession: async ({ params, body }) => ctx.manager.createSession(ctx.manager.get(params.id), body),
    listSessions: async ({ params }) => listSessions(params.id),
    getSession: async ({ params }) =>
      (await sessionLink(params.id, params.sessionId)).call('session.get', { sessionId: params.sessionId }),
    deleteSession: async ({ params }) => {
      const sandbox = ctx.manager.get(params.id)
      await (await sandbox.link()).call('session.delete', { sessionId: params.sessionId })
      ctx.manager.forgetSession(sandbox, params.sessionId)
      return OK
    },
    runInSession: async ({ params, body }) => {
      checkCommand(body.command, ctx.limits)
      const sandbox = ctx.manager.get(params.id)
      const agent = await sandbox.link()
      noteSession(sandbox, params.sessionId)
      const result = await timedRun(sandbox, async () =>
        bufferedResult(
          await agent.call('session.run', {
            sessionId: params.sessionId,
            id: randomId('rest_', 12),
            command: body.command,
            timeoutMs: clampCallTimeout(body.timeoutMs, ctx.limits),
            stdin: stdinToBase64(body.stdin, body.stdinEncoding),
            buffer: true,
            outputCapBytes: ctx.limits.outputCapBytes,
          }),
        ),
      )
      return encodeRunResult(result, body.encoding)
    },
    interruptSession: async ({ params }) => {
      await (await sessionLink(params.id, params.sessionId)).call('session.interrupt', {
        sessionId: params.sessionId,
      })
      return OK
    },
    listEnv: async ({ params }) =>
      (await sessionLink(params.id, params.sessionId)).call('session.env.list', {
        sessionId: params.sessionId,
      }),
    getEnv: async ({ params }) => {
      const { value } = await (await sessionLink(params.id, params.sessionId)).call('session.env.get', {
        sessionId: params.sessionId,
        name: params.name,
      })
      return { name: params.name, value }
    },
    setEnv: async ({ params, body }) => {
      await (await sessionLink(params.id, params.sessionId)).call('session.env.set', {
        sessionId: params.sessionId,
        name: params.name,
        value: body.value,
      })
      return OK
    },
    unsetEnv: async ({ params }) => {
      await (await sessionLink(params.id, params.sessionId)).call('session.env.unset', {
        sessionId: params.sessionId,
        name: params.name,
      })
      return OK
    },
    listAliases: async ({ params }) =>
      (await sessionLink(params.id, params.sessionId)).call('session.alias.list', {
        sessionId: params.sessionId,
      }),
    addAlias: async ({ params, body }) => {
      await (await sessionLink(params.id, params.sessionId)).call('session.alias.add', {
        sessionId: params.sessionId,
        name: params.name,
        value: body.value,
      })
      return OK
    },
    removeAlias: async ({ params }) => {
      await (await sessionLink(params.id, params.sessionId)).call('session.alias.remove', {
        sessionId: params.sessionId,
        name: params.name,
      })
      return OK
    },
    history: async ({ params, query }) =>
      (await sessionLink(params.id, params.sessionId)).call('session.history', {
        sessionId: params.sessionId,
        ...query,
      }),
    replayHistory: async ({ params }) => {
      const sandbox = ctx.manager.get(params.id)
      const agent = await sessionLink(params.id, params.sessionId)
      const result = await timedRun(sandbox, () =>
        agent.call('session.history.replay', {
          sessionId: params.sessionId,
          index: params.index,
          id: randomId('rest_', 12),
          outputCapBytes: ctx.limits.outputCapBytes,
        }),
      )
      return encodeRunResult(result, 'utf8')
    },
  })
}
