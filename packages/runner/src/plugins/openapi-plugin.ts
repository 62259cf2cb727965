import { buildOpenApiDocument } from '@conch/protocol'
import type { FastifyInstance } from 'fastify'
import type { RunnerContext } from '../runner-context.ts'

/** Serves the OpenAPI document generated from the protocol's route table at `/v1/openapi.json`. */
export async function openapiPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  const document = buildOpenApiDocument(ctx.version)
  app.get('/v1/openapi.json', { config: { access: 'any' } }, async () => document)
}
