import type { FastifyInstance } from 'fastify'
import { bindRoutes } from '../route-table.ts'
import type { RunnerContext } from '../runner-context.ts'

/**
 * `/healthz` (the process answers) and `/readyz` (stored sandboxes were reconnected). `/readyz`
 * also names the shard and how full the runner is, which a router reads to place new sandboxes.
 */
export async function healthPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  bindRoutes(app, {
    health: async () => ({ ok: true, version: ctx.version }),
    ready: async ({ reply }) => {
      const ready = ctx.manager.ready
      reply.code(ready ? 200 : 503)
      return {
        ok: ready,
        version: ctx.version,
        checks: { sandboxesRestored: ready },
        ...(ctx.shard ? { shard: ctx.shard } : {}),
        load: { sandboxes: ctx.manager.liveCount(), maxSandboxes: ctx.limits.maxSandboxes },
      }
    },
  })
}
