import { z } from 'zod'
import { API_ERROR_BODY, API_ROUTES, type ApiRoute } from './api-routes.ts'
import { ERROR_STATUS } from './error-status.ts'

type Json = Record<string, unknown>

function schemaOf(type: z.ZodType, io: 'input' | 'output'): Json {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(type, { io, unrepresentable: 'any' }) as Json
  return rest
}

function parametersOf(route: ApiRoute): Json[] {
  const out: Json[] = []
  for (const [where, type] of [
    ['path', route.params],
    ['query', route.query],
  ] as const) {
    if (!type) continue
    const schema = schemaOf(type, 'input') as { properties?: Record<string, Json>; required?: string[] }
    for (const [name, property] of Object.entries(schema.properties ?? {})) {
      out.push({
        name,
        in: where,
        required: where === 'path' || (schema.required ?? []).includes(name),
        schema: property,
      })
    }
  }
  return out
}

/** Builds the OpenAPI 3.1 document of the runner's REST API from `API_ROUTES`. */
export function buildOpenApiDocument(version: string): Json {
  const paths: Record<string, Record<string, Json>> = {}
  const errorStatuses = [...new Set(Object.values(ERROR_STATUS))].sort()
  for (const route of API_ROUTES as readonly ApiRoute[]) {
    const path = route.path.replace(/:([A-Za-z]+)/g, '{$1}')
    const responses: Json = {}
    if (route.produces) {
      responses['200'] = {
        description: 'OK',
        content: {
          [route.produces]: { schema: { type: 'string', format: 'binary' } },
          ...(route.response ? { 'application/json': { schema: schemaOf(route.response, 'output') } } : {}),
        },
      }
    } else if (route.response) {
      responses['200'] = {
        description: 'OK',
        content: { 'application/json': { schema: schemaOf(route.response, 'output') } },
      }
    }
    for (const status of errorStatuses) {
      responses[String(status)] = {
        description: 'Error',
        content: { 'application/json': { schema: schemaOf(API_ERROR_BODY, 'output') } },
      }
    }
    const operation: Json = {
      operationId: route.operationId,
      summary: route.summary,
      parameters: parametersOf(route),
      responses,
      ...(route.public ? { security: [] } : {}),
    }
    if (route.body) {
      operation.requestBody = {
        required: true,
        content: { 'application/json': { schema: schemaOf(route.body, 'input') } },
      }
    } else if (route.consumes) {
      operation.requestBody = {
        required: true,
        content: { [route.consumes]: { schema: { type: 'string', format: 'binary' } } },
      }
    }
    paths[path] ??= {}
    paths[path][route.method.toLowerCase()] = operation
  }
  return {
    openapi: '3.1.0',
    info: { title: 'conch runner API', version },
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'The runner API key, or a sandbox-scoped token',
        },
      },
    },
    security: [{ bearer: [] }],
    paths,
  }
}
