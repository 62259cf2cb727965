import { clampTimeout, type ExecEvent, type ExecRequest, LIMITS } from '@conch/protocol'
import type { FastifyInstance, FastifyReply } from 'fastify'
import type { AgentLink } from '../agent-link.ts'
import { randomId } from '../credentials.ts'
import { channelToNdjson } from '../ndjson-stream.ts'
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

/** One-shot exec: a fresh `bash -c`, or a run in a session's shell; buffered or NDJSON-streamed. */
export async function execPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  function finished(release: () => void, started: number, outcome: string): void {
    release()
    ctx.metrics.runs.inc({ via: 'exec', outcome })
    ctx.metrics.runDuration.observe({ via: 'exec' }, (performance.now() - started) / 1000)
  }

  async function buffered(sandbox: SandboxRuntime, agent: AgentLink, body: ExecRequest) {
    const release = sandbox.acquireRun(ctx.limits.maxQueuedRunsPerSandbox)
    const started = performance.now()
    let outcome = 'error'
    try {
      const stdin = stdinToBase64(body.stdin, body.stdinEncoding)
      const result = bufferedResult(
        body.sessionId
          ? await agent.call('session.run', {
              sessionId: body.sessionId,
              id: randomId('exec_', 12),
              command: body.command,
              timeoutMs: clampCallTimeout(body.timeoutMs, ctx.limits),
              stdin,
              buffer: true,
              outputCapBytes: ctx.limits.outputCapBytes,
            })
          : await agent.call('exec', {
              ...freshExec(body, stdin),
              outputCapBytes: ctx.limits.outputCapBytes,
            }),
      )
      outcome = result.timedOut ? 'timeout' : 'exit'
      return encodeRunResult(result, body.encoding)
    } finally {
      finished(release, started, outcome)
    }
  }

  /** The agent's `exec` params for a fresh `bash -c`, shared by the buffered and streamed forms. */
  function freshExec(body: ExecRequest, stdin: string | undefined) {
    return {
      command: body.command,
      cwd: body.cwd,
      env: body.env,
      stdin,
      timeoutMs: clampTimeout(body.timeoutMs, LIMITS.defaultCommandTimeoutMs, ctx.limits.maxCommandTimeoutMs),
    }
  }

  async function streamed(sandbox: SandboxRuntime, agent: AgentLink, body: ExecRequest, reply: FastifyReply) {
    const release = sandbox.acquireRun(ctx.limits.maxQueuedRunsPerSandbox)
    const started = performance.now()
    const channel = agent.openChannel()
    const run = body.sessionId ? randomId('exec_', 12) : undefined
    try {
      const stdin = stdinToBase64(body.stdin, body.stdinEncoding)
      if (body.sessionId) {
        await agent.call('session.attach', { sessionId: body.sessionId, ch: channel.id })
        await agent.call('session.run', {
          sessionId: body.sessionId,
          id: run!,
          command: body.command,
          timeoutMs: clampCallTimeout(body.timeoutMs, ctx.limits),
          stdin,
          buffer: false,
        })
      } else {
        await agent.call('exec', { ...freshExec(body, stdin), ch: channel.id })
      }
    } catch (error) {
      channel.close()
      finished(release, started, 'error')
      throw error
    }
    const body$ = channelToNdjson(channel, {
      encoding: body.encoding ?? 'utf8',
      ...(run ? { run } : {}),
      onDone: (event: ExecEvent | null) => {
        const outcome = event?.type === 'exit' ? (event.timedOut ? 'timeout' : 'exit') : 'error'
        finished(release, started, outcome)
      },
    })
    reply.type('application/x-ndjson')
    return reply.send(body$)
  }

  bindRoutes(app, {
    exec: async ({ params, body, reply }) => {
      checkCommand(body.command, ctx.limits)
      const sandbox = ctx.manager.get(params.id)
      const agent = await sandbox.link()
      if (body.sessionId && !ctx.store.hasSession(sandbox.id, body.sessionId)) {
        ctx.manager.checkSessionLimit(sandbox)
        ctx.manager.noteSession(sandbox, body.sessionId)
      }
      return body.stream ? streamed(sandbox, agent, body, reply) : buffered(sandbox, agent, body)
    },
  })
}
