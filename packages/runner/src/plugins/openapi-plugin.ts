import { buildOpenApiDocument } from '@conch/protocol'
import type { FastifyInstance } from 'fastify'
import type { RunnerContext } from '../runner-context.ts'

/**
 * Serves the OpenAPI document generated from the protocol's route table at `/v1/openapi.json`.
 * The document (about 850 KB of JSON, several MB as objects) is built on the first request, not
 * at start-up, since most runners are never asked for it; after that the runner keeps only its
 * JSON text.
 */
export async function openapiPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  let json: string | undefined
  app.get('/v1/openapi.json', { config: { access: 'any' } }, async (_request, reply) => {
    json ??= JSON.stringify(buildOpenApiDocument(ctx.version))
    return reply.type('application/json; charset=utf-8').send(json)
  })
}
