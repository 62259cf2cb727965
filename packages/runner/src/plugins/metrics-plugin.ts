import type { FastifyInstance } from 'fastify'
import type { RunnerContext } from '../runner-context.ts'
import type { SandboxUsageSample } from '../runner-metrics.ts'

/** Serves Prometheus metrics at `/metrics` (API key only), with each sandbox's usage read at scrape time. */
export async function metricsPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  app.get('/metrics', { config: { access: 'admin' } }, async (_request, reply) => {
    ctx.metrics.setUsage(await usageSamples(ctx))
    reply.type(ctx.metrics.registry.contentType)
    return ctx.metrics.registry.metrics()
  })
}

/**
 * The usage of every sandbox whose driver measures it, as `GET /v1/sandboxes/:id` reports it
 * (awaited, since reading a driver's usage may take a round trip to the sandbox).
 */
async function usageSamples(ctx: RunnerContext): Promise<SandboxUsageSample[]> {
  const infos = await Promise.all(ctx.manager.list().map(async (runtime) => await ctx.manager.info(runtime)))
  return infos.flatMap((info) => (info.usage ? [{ sandboxId: info.id, usage: info.usage }] : []))
}
