import type { FastifyInstance } from 'fastify'
import type { RunnerContext } from '../runner-context.ts'

/** Serves Prometheus metrics at `/metrics` (API key only). */
export async function metricsPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  app.get('/metrics', { config: { access: 'admin' } }, async (_request, reply) => {
    reply.type(ctx.metrics.registry.contentType)
    return ctx.metrics.registry.metrics()
  })
}
