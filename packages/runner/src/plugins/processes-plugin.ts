import { BoundedEnv } from '@conch/protocol'
import type { FastifyInstance } from 'fastify'
import { channelToNdjson } from '../ndjson-stream.ts'
import { bindRoutes } from '../route-table.ts'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'

/** BAD_REQUEST unless a process's environment is within the bounds a sandbox's is. */
function checkEnv(env: Record<string, string> | undefined): void {
  if (env === undefined) return
  const parsed = BoundedEnv.safeParse(env)
  if (parsed.success) return
  const issue = parsed.error.issues[0]
  const path = ['env', ...(issue?.path ?? []).map(String)].join('.')
  throw new RunnerError('BAD_REQUEST', `invalid body: ${path}: ${issue?.message ?? 'not accepted'}`)
}

/** Background processes: start, list, get, output since an offset, NDJSON stream, kill, wait. */
export async function processesPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  const link = (id: string) => ctx.manager.get(id).link()
  bindRoutes(app, {
    startProcess: async ({ params, body }) => {
      checkEnv(body.env)
      const { keepAlive, ...options } = body
      const sandbox = ctx.manager.get(params.id)
      if (keepAlive === true) ctx.manager.lifetimes.checkKeptProcesses(sandbox)
      const info = await (await sandbox.link()).call('process.start', options)
      // A long job keeps its sandbox awake while it runs (sandbox-lifetimes.ts).
      if (keepAlive === true) ctx.manager.lifetimes.keepProcess(sandbox, info.id)
      return info
    },
    listProcesses: async ({ params }) => (await link(params.id)).call('process.list', {}),
    getProcess: async ({ params }) => (await link(params.id)).call('process.get', { id: params.processId }),
    processOutput: async ({ params, query }) => {
      const out = await (await link(params.id)).call('process.output', {
        id: params.processId,
        since: query.since,
      })
      const encoding = query.encoding ?? 'utf8'
      return {
        stdout: encoding === 'base64' ? out.stdout : Buffer.from(out.stdout, 'base64').toString('utf8'),
        stderr: encoding === 'base64' ? out.stderr : Buffer.from(out.stderr, 'base64').toString('utf8'),
        encoding,
        nextOffset: out.nextOffset,
        status: out.status,
      }
    },
    streamProcess: async ({ params, query, reply }) => {
      const agent = await link(params.id)
      const channel = agent.openChannel()
      try {
        await agent.call('process.stream', { id: params.processId, ch: channel.id, since: query.since })
      } catch (error) {
        channel.close()
        throw error
      }
      reply.type('application/x-ndjson')
      // A client following the output keeps the sandbox awake (sandbox-lifetimes.ts).
      const release = ctx.manager.get(params.id).hold()
      return reply.send(channelToNdjson(channel, { encoding: query.encoding ?? 'utf8', onDone: release }))
    },
    killProcess: async ({ params, body }) =>
      (await link(params.id)).call('process.kill', { id: params.processId, signal: body.signal }),
    waitProcess: async ({ params, body }) =>
      (await link(params.id)).call('process.wait', { id: params.processId, timeoutMs: body.timeoutMs }),
  })
}
