// Emits the JSON Schema of every frame union and the OpenAPI document into dist/, for the docs site.
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'
import {
  AgentFrame,
  buildOpenApiDocument,
  ClientFrame,
  HostFrame,
  PROTOCOL_VERSION,
  ServerFrame,
} from '../src/index.ts'

const out = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist')
mkdirSync(out, { recursive: true })
const schemas = {
  protocolVersion: PROTOCOL_VERSION,
  ClientFrame: z.toJSONSchema(ClientFrame, { io: 'input' }),
  ServerFrame: z.toJSONSchema(ServerFrame, { io: 'output' }),
  HostFrame: z.toJSONSchema(HostFrame, { io: 'input' }),
  AgentFrame: z.toJSONSchema(AgentFrame, { io: 'output' }),
}
writeFileSync(join(out, 'frames.schema.json'), `${JSON.stringify(schemas, null, 2)}\n`)
writeFileSync(
  join(out, 'openapi.json'),
  `${JSON.stringify(buildOpenApiDocument(String(PROTOCOL_VERSION)), null, 2)}\n`,
)
