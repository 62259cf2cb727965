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
import type { SandboxRuntime } from '../sandbox-manager.ts'

const OK = { ok: true as const }

/** Sessions: create, list, get, delete, buffered runs, interrupt, env, aliases and history. */
export async function sessionsPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  const link = (id: string) => ctx.manager.get(id).link()

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

  bindRoutes(app, {
    createSession: async ({ params, body }) => ctx.manager.createSession(ctx.manager.get(params.id), body),
    listSessions: async ({ params }) => (await link(params.id)).call('session.list', {}),
    getSession: async ({ params }) =>
      (await link(params.id)).call('session.get', { session: params.sessionId }),
    deleteSession: async ({ params }) => {
      const sandbox = ctx.manager.get(params.id)
      await (await sandbox.link()).call('session.delete', { session: params.sessionId })
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
            session: params.sessionId,
            run: randomId('rest_', 12),
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
      await (await link(params.id)).call('session.interrupt', { session: params.sessionId })
      return OK
    },
    listEnv: async ({ params }) =>
      (await link(params.id)).call('session.env.list', { session: params.sessionId }),
    getEnv: async ({ params }) => {
      const { value } = await (await link(params.id)).call('session.env.get', {
        session: params.sessionId,
        name: params.name,
      })
      return { name: params.name, value }
    },
    setEnv: async ({ params, body }) => {
      await (await link(params.id)).call('session.env.set', {
        session: params.sessionId,
        name: params.name,
        value: body.value,
      })
      return OK
    },
    unsetEnv: async ({ params }) => {
      await (await link(params.id)).call('session.env.unset', {
        session: params.sessionId,
        name: params.name,
      })
      return OK
    },
    listAliases: async ({ params }) =>
      (await link(params.id)).call('session.alias.list', { session: params.sessionId }),
    addAlias: async ({ params, body }) => {
      await (await link(params.id)).call('session.alias.add', {
        session: params.sessionId,
        name: params.name,
        value: body.value,
      })
      return OK
    },
    removeAlias: async ({ params }) => {
      await (await link(params.id)).call('session.alias.remove', {
        session: params.sessionId,
        name: params.name,
      })
      return OK
    },
    history: async ({ params, query }) =>
      (await link(params.id)).call('session.history', { session: params.sessionId, ...query }),
    replayHistory: async ({ params }) => {
      const sandbox = ctx.manager.get(params.id)
      const agent = await sandbox.link()
      const result = await timedRun(sandbox, () =>
        agent.call('session.history.replay', {
          session: params.sessionId,
          index: params.index,
          run: randomId('rest_', 12),
          outputCapBytes: ctx.limits.outputCapBytes,
        }),
      )
      return encodeRunResult(result, 'utf8')
    },
  })
}
