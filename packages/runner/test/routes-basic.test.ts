import { API_ROUTES, ErrorBody } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { startRunner } from './runner-fixture.ts'

describe('route table', () => {
  it('registers every route of the protocol table', async () => {
    await using runner = await startRunner()
    for (const route of API_ROUTES) {
      const url = route.path
        .replace(':id', 'sb_xxxxxxxxxxxx')
        .replace(':sessionId', 'default')
        .replace(':processId', 'proc_abcd')
        .replace(':name', 'X')
        .replace(':index', '0')
      const res = await runner.app.inject({ method: route.method, url, headers: runner.auth })
      expect(ErrorBody.safeParse(res.json()).data?.error.code, `${route.method} ${route.path}`).not.toBe(
        'NOT_FOUND',
      )
    }
  })

  it('serves the OpenAPI document with every operation', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({ method: 'GET', url: '/v1/openapi.json', headers: runner.auth })
    expect(res.statusCode).toBe(200)
    const doc = res.json() as {
      openapi: string
      paths: Record<string, Record<string, { operationId: string }>>
    }
    expect(doc.openapi).toBe('3.1.0')
    const ids = Object.values(doc.paths).flatMap((p) => Object.values(p).map((o) => o.operationId))
    expect(ids.sort()).toEqual(API_ROUTES.map((r) => r.operationId).sort())
  })

  it('serves Prometheus metrics to the API key', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({ method: 'GET', url: '/metrics', headers: runner.auth })
    expect(res.statusCode).toBe(200)
    expect(res.body).toContain('conch_sandboxes')
    expect(res.body).toContain('conch_run_duration_seconds')
  })
})

describe('bad input', () => {
  it('answers malformed JSON with BAD_REQUEST', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      payload: '{"env":',
    })
    expect(res.statusCode).toBe(400)
    expect(ErrorBody.parse(res.json()).error.code).toBe('BAD_REQUEST')
  })

  it('reads an empty body sent as JSON as no body', async () => {
    await using runner = await startRunner()
    const json = { ...runner.auth, 'content-type': 'application/json' }
    const created = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: json,
      payload: '',
    })
    expect(created.statusCode).toBe(200)
    const { id } = created.json() as { id: string }
    const deleted = await runner.app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers: json })
    expect(deleted.statusCode).toBe(200)
    const gone = await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })
    expect(ErrorBody.parse(gone.json()).error.code).toBe('SANDBOX_NOT_FOUND')
  })

  it('answers an invalid option with BAD_REQUEST naming the field', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { env: { 'BAD NAME': 'x' }, idleTimeoutMs: -1 },
    })
    expect(res.statusCode).toBe(400)
    const body = ErrorBody.parse(res.json())
    expect(body.error.code).toBe('BAD_REQUEST')
    expect(body.error.message).toContain('idleTimeoutMs')
  })

  it('answers an unknown driver with BAD_REQUEST', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { driver: 'vm' },
    })
    expect(ErrorBody.parse(res.json()).error).toMatchObject({ code: 'BAD_REQUEST' })
  })

  it('answers a missing query parameter with BAD_REQUEST', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({
      method: 'GET',
      url: '/v1/sandboxes/sb_xxxxxxxxxxxx/files/stat',
      headers: runner.auth,
    })
    expect(ErrorBody.parse(res.json()).error.code).toBe('BAD_REQUEST')
  })
})
