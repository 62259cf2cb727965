import { describe, expect, it } from 'vitest'
import { API_ROUTES } from './api-routes.ts'
import { buildOpenApiDocument } from './openapi.ts'

describe('buildOpenApiDocument', () => {
  it('documents every route with its operationId', () => {
    const doc = buildOpenApiDocument('1') as {
      paths: Record<string, Record<string, { operationId: string }>>
    }
    const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((o) => o.operationId))
    expect(ids.sort()).toEqual(API_ROUTES.map((r) => r.operationId).sort())
  })

  it('declares path parameters in OpenAPI form', () => {
    const doc = buildOpenApiDocument('1') as { paths: Record<string, unknown> }
    expect(Object.keys(doc.paths)).toContain('/v1/sandboxes/{id}/sessions/{sessionId}')
  })
})
