import { describe, expect, it } from 'vitest'
import { startRunner } from './runner-fixture.ts'

const APP = 'https://app.example.com'

describe('cross-origin requests', () => {
  it('sends no CORS headers when no origin is configured', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({
      method: 'GET',
      url: '/v1/sandboxes',
      headers: { ...runner.auth, origin: APP },
    })
    expect(res.statusCode).toBe(200)
    expect(res.headers['access-control-allow-origin']).toBeUndefined()
  })

  it('answers the preflight of an allowed origin without credentials', async () => {
    await using runner = await startRunner({ corsOrigins: [APP] })
    const res = await runner.app.inject({
      method: 'OPTIONS',
      url: '/v1/sandboxes/sb_abcdefghijkl/exec',
      headers: {
        origin: APP,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization',
      },
    })
    expect(res.statusCode).toBe(204)
    expect(res.headers['access-control-allow-origin']).toBe(APP)
    expect(res.headers['access-control-allow-headers']).toContain('authorization')
    expect(res.headers['access-control-allow-methods']).toContain('POST')
  })

  it('lets an allowed origin read answers, and still requires a credential', async () => {
    await using runner = await startRunner({ corsOrigins: [APP] })
    const ok = await runner.app.inject({
      method: 'GET',
      url: '/v1/sandboxes',
      headers: { ...runner.auth, origin: APP },
    })
    expect(ok.headers['access-control-allow-origin']).toBe(APP)
    expect(ok.headers.vary).toContain('Origin')
    const denied = await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: { origin: APP } })
    expect(denied.statusCode).toBe(401)
    expect(denied.headers['access-control-allow-origin']).toBe(APP)
  })

  it('gives other origins no CORS headers and no preflight answer', async () => {
    await using runner = await startRunner({ corsOrigins: [APP] })
    const res = await runner.app.inject({
      method: 'OPTIONS',
      url: '/v1/sandboxes',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    })
    expect(res.headers['access-control-allow-origin']).toBeUndefined()
    expect(res.statusCode).not.toBe(204)
  })
})
