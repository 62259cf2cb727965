// Attacks on the port relay as a browser meets it: a port token used beyond its port, cookies a
// sandbox server sets for other ports, sandboxes or the operator's sites, a page policy the
// server tries to loosen, and relayed connections kept open after their credential ended.
import { request } from 'node:http'
import { describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { PATH_FORM_CSP } from '../../src/plugins/ports-plugin.ts'
import { errorCode, expose, portUrl, sandboxToken, startSandboxServer } from '../ports/port-fixture.ts'
import { baseUrl, createSandbox, startRunner } from '../runner-fixture.ts'

describe('attack: use a port token beyond its port', () => {
  it('opens no API route, shell socket or keep-alive of its sandbox', async () => {
    await using runner = await startRunner({ listen: true })
    const a = await createSandbox(runner)
    const { token } = await expose(runner, a, 3000)
    const base = `${baseUrl(runner.app)}/v1/sandboxes/${a}`
    const bearer = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['POST', '/keep-alive', '{"durationMs":60000}'],
      ['POST', '/exec', '{"command":"id"}'],
      ['GET', '/files?path=/workspace', undefined],
      ['POST', '/tokens', '{}'],
      ['POST', '/exposed-ports/3001', '{}'],
      ['DELETE', '/exposed-ports/3000', undefined],
    ] as const) {
      const res = await fetch(`${base}${path}`, { method, headers: bearer, ...(body ? { body } : {}) })
      expect(res.status, `${method} ${path}`).toBe(401)
      expect(await errorCode(res)).toBe('UNAUTHORIZED')
    }
    // Nor as the WebSocket subprotocol credential of a shell socket.
    const ws = new WebSocket(`${base.replace('http', 'ws')}/shell`, ['conch.v1', `bearer.${token}`])
    const refused = await new Promise<number>((resolve) => {
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
      ws.once('open', () => resolve(101))
      ws.once('error', () => resolve(0))
    })
    ws.terminate()
    expect(refused).toBe(401)
  })
})

describe('attack: a revoked port token comes back', () => {
  it('stays refused after the port is exposed again, while the new token works', async () => {
    await using runner = await startRunner({ listen: true })
    const a = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)
    const leaked = (await expose(runner, a, port)).token
    expect(
      (await fetch(portUrl(runner, a, port, '/echo'), { headers: { authorization: `Bearer ${leaked}` } }))
        .status,
    ).toBe(200)
    const unexposed = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${a}/exposed-ports/${port}`, {
      method: 'DELETE',
      headers: runner.auth,
    })
    expect(unexposed.status).toBe(200)
    // The owner exposes the port again for someone else; the leaked token must not revive.
    const fresh = (await expose(runner, a, port)).token
    const withLeaked = await fetch(portUrl(runner, a, port, '/echo'), {
      headers: { authorization: `Bearer ${leaked}` },
    })
    expect(withLeaked.status).toBe(401)
    expect(await errorCode(withLeaked)).toBe('UNAUTHORIZED')
    expect(
      (await fetch(portUrl(runner, a, port, '/echo'), { headers: { authorization: `Bearer ${fresh}` } }))
        .status,
    ).toBe(200)
    // Exposing a port that is still exposed keeps its tokens working (it extends the exposure).
    const again = (await expose(runner, a, port)).token
    for (const token of [fresh, again])
      expect(
        (await fetch(portUrl(runner, a, port, '/echo'), { headers: { authorization: `Bearer ${token}` } }))
          .status,
      ).toBe(200)
  })
})

describe('attack: a sandbox server sets cookies beyond its port', () => {
  const hostile = (id: string, other: string): string[] => [
    'wide=1; Domain=example.test; Path=/',
    `fixation=1; Path=/v1/sandboxes/${other}/ports/3000/`,
    'root=1',
    `=conch_port_token=planted-${id}; Path=/`,
    'Conch_Port_Token=planted; Path=/',
    `own=1; Path=/v1/sandboxes/${id}/ports/PORT/app; HttpOnly`,
  ]

  it('on the path form: no Domain, every Path under its own port, never the runner cookie', async () => {
    await using runner = await startRunner({ listen: true })
    const a = await createSandbox(runner)
    const b = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)
    const prefix = `/v1/sandboxes/${a}/ports/${port}`
    const cookies = hostile(a, b).map((c) => c.replace('PORT', String(port)))
    const res = await fetch(
      portUrl(runner, a, port, `/cookies?c=${encodeURIComponent(JSON.stringify(cookies))}`),
      {
        headers: runner.auth,
      },
    )
    expect(res.status).toBe(200)
    expect(res.headers.getSetCookie()).toEqual([
      `wide=1; Path=${prefix}/`,
      `fixation=1; Path=${prefix}/v1/sandboxes/${b}/ports/3000/`,
      `root=1; Path=${prefix}/`,
      `own=1; Path=${prefix}/app; HttpOnly`,
    ])
  })

  it('on a preview host: no Domain, so a cookie never reaches another sandbox’s preview host', async () => {
    await using runner = await startRunner({
      listen: true,
      network: { allowPublicPorts: false, previewDomain: 'preview.test' },
    })
    const a = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)
    const cookies = [
      'wide=1; Domain=preview.test; Path=/',
      'parent=1; domain=.test',
      'own=1; Path=/x; Secure',
    ]
    const setCookie = await new Promise<string[]>((resolve, reject) => {
      const url = new URL(baseUrl(runner.app))
      const req = request({
        host: '127.0.0.1',
        port: url.port,
        path: `/cookies?c=${encodeURIComponent(JSON.stringify(cookies))}`,
        setHost: false,
        headers: {
          host: `${port}-${a.toLowerCase()}.preview.test`,
          authorization: `Bearer ${runner.apiKey}`,
        },
      })
      req.on('response', (res) => {
        res.resume()
        resolve(res.headers['set-cookie'] ?? [])
      })
      req.on('error', reject)
      req.end()
    })
    expect(setCookie).toEqual(['wide=1; Path=/', 'parent=1', 'own=1; Path=/x; Secure'])
  })

  it('cannot shadow a port’s cookie with one a sibling preview host set on the parent domain', async () => {
    await using runner = await startRunner({
      listen: true,
      network: { allowPublicPorts: false, previewDomain: 'preview.test' },
    })
    const a = await createSandbox(runner)
    const b = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)
    const { token } = await expose(runner, a, port)
    const { token: bToken } = await expose(runner, b, port)
    // B's page planted its own token (and junk) for the whole domain; the browser sends them first.
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(baseUrl(runner.app))
      const req = request({
        host: '127.0.0.1',
        port: url.port,
        path: '/echo',
        setHost: false,
        headers: {
          host: `${port}-${a.toLowerCase()}.preview.test`,
          cookie: `conch_port_token=${bToken}; conch_port_token=junk; conch_port_token=${token}`,
        },
      })
      req.on('response', (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.end()
    })
    expect(status).toBe(200)
  })
})

describe('attack: a sandbox server loosens the page policy of the path form', () => {
  it('cannot replace the runner’s content security policy or have it dropped as a hop-by-hop header', async () => {
    await using runner = await startRunner({ listen: true })
    const a = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)
    for (const headers of [
      { connection: 'content-security-policy, keep-alive' },
      { 'content-security-policy': 'sandbox allow-scripts allow-same-origin' },
      { 'Content-Security-Policy': 'default-src *', connection: 'Content-Security-Policy' },
    ]) {
      const res = await fetch(
        portUrl(runner, a, port, `/headers?h=${encodeURIComponent(JSON.stringify(headers))}`),
        {
          headers: runner.auth,
        },
      )
      expect(await res.text()).toBe('headers')
      expect(res.headers.get('content-security-policy'), JSON.stringify(headers)).toBe(PATH_FORM_CSP)
    }
  })
})

describe('attack: a sandbox server acts on the whole origin', () => {
  it('cannot clear site data, pin HTTPS or point the browser elsewhere, on the path form or a preview host', async () => {
    await using runner = await startRunner({
      listen: true,
      network: { allowPublicPorts: false, previewDomain: 'preview.test' },
    })
    const a = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)
    const hostile = {
      'clear-site-data': '"cookies", "storage"',
      'strict-transport-security': 'max-age=31536000; includeSubDomains',
      'alt-svc': 'h2="elsewhere.example:443"',
      'x-app': 'kept',
    }
    const path = `/headers?h=${encodeURIComponent(JSON.stringify(hostile))}`
    const viaPath = await fetch(portUrl(runner, a, port, path), { headers: runner.auth })
    const viaPreview = await new Promise<import('node:http').IncomingHttpHeaders>((resolve, reject) => {
      const url = new URL(baseUrl(runner.app))
      const req = request({
        host: '127.0.0.1',
        port: url.port,
        path,
        setHost: false,
        headers: {
          host: `${port}-${a.toLowerCase()}.preview.test`,
          authorization: `Bearer ${runner.apiKey}`,
        },
      })
      req.on('response', (res) => {
        res.resume()
        resolve(res.headers)
      })
      req.on('error', reject)
      req.end()
    })
    for (const name of ['clear-site-data', 'strict-transport-security', 'alt-svc']) {
      expect(viaPath.headers.get(name), name).toBeNull()
      expect(viaPreview[name], name).toBeUndefined()
    }
    expect(viaPath.headers.get('x-app')).toBe('kept')
    expect(viaPreview['x-app']).toBe('kept')
  })
})

describe('attack: keep a relayed WebSocket after its credential ends', () => {
  /** Opens a WebSocket to the relay; resolves once open, with a promise of its close code. */
  async function openSocket(
    url: string,
    headers: Record<string, string> = {},
  ): Promise<{ closed: Promise<number>; ws: WebSocket }> {
    const ws = new WebSocket(url.replace('http', 'ws'), { headers })
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    })
    ws.send('still here')
    await new Promise((resolve) => ws.once('message', resolve))
    return { closed, ws }
  }

  it('closes a socket opened with a port token or public access when the port is unexposed, and one opened with a token when it expires', async () => {
    let clock = Date.now()
    await using runner = await startRunner({
      listen: true,
      now: () => clock,
      network: { allowPublicPorts: true, previewDomain: null },
    })
    const a = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)
    const { token } = await expose(runner, a, port)
    const { closed: viaPortToken } = await openSocket(
      `${portUrl(runner, a, port, '/ws')}?conch_port_token=${token}`,
    )
    const { closed: viaApiKey, ws: apiKeySocket } = await openSocket(
      portUrl(runner, a, port, '/ws'),
      runner.auth,
    )
    const unexposed = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${a}/exposed-ports/${port}`, {
      method: 'DELETE',
      headers: runner.auth,
    })
    expect(unexposed.status).toBe(200)
    expect(await viaPortToken).toBe(1006)

    // A long answer (server-sent events without end) opened with a port token ends the same way.
    const { token: sseToken } = await expose(runner, a, port)
    const sse = await fetch(portUrl(runner, a, port, '/sse-forever'), {
      headers: { authorization: `Bearer ${sseToken}` },
    })
    const reader = (sse.body as ReadableStream<Uint8Array>).getReader()
    expect((await reader.read()).done).toBe(false)
    await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${a}/exposed-ports/${port}`, {
      method: 'DELETE',
      headers: runner.auth,
    })
    const drained = async (): Promise<boolean> => {
      for (;;) if ((await reader.read()).done) return true
    }
    await expect(drained()).rejects.toThrow()

    await expose(runner, a, port, { public: true })
    const { closed: viaPublic } = await openSocket(portUrl(runner, a, port, '/ws'))
    await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${a}/exposed-ports/${port}`, {
      method: 'DELETE',
      headers: runner.auth,
    })
    expect(await viaPublic).toBe(1006)

    const short = (await expose(runner, a, port, { ttlMs: 60_000 })).token
    const { closed: viaShort } = await openSocket(
      `${portUrl(runner, a, port, '/ws')}?conch_port_token=${short}`,
    )
    const sandboxTok = await sandboxToken(runner, a)
    const { closed: viaSandboxToken } = await openSocket(portUrl(runner, a, port, '/ws'), {
      authorization: `Bearer ${sandboxTok}`,
    })
    // Past both tokens' expiry (a sandbox token lives an hour by default).
    clock += 25 * 60 * 60 * 1000
    expect(await viaShort).toBe(1006)
    expect(await viaSandboxToken).toBe(1006)
    // The API key never expires: its socket is still open and relaying.
    const stillOpen = await Promise.race([viaApiKey, Promise.resolve('open')])
    expect(stillOpen).toBe('open')
    apiKeySocket.close()
    // A clean close handshake through the relay (the echo server answers without a code).
    expect(await viaApiKey).toBe(1005)
  })
})
