// Attacks on the port relay: other sandboxes' credentials, forged and expired tokens, paths
// that try to leave the port, bad port numbers, request smuggling, hostile sandbox servers
// (endless headers, never reading), and reaching another sandbox or the runner from inside.
import { request } from 'node:http'
import { type AddressInfo, connect, createServer } from 'node:net'
import { AccessToken, ExposedPort } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { WebSocket } from 'ws'
import { PATH_FORM_CSP } from '../../src/plugins/ports-plugin.ts'
import { gvisorRunner } from '../gvisor-runner.ts'
import { exec, nsRunner } from '../namespace-runner.ts'
import { portUrl, startSandboxServer } from '../ports/port-fixture.ts'
import { baseUrl, createSandbox, startRunner, type TestRunner } from '../runner-fixture.ts'

async function expose(runner: TestRunner, id: string, port: number, body: object = {}): Promise<ExposedPort> {
  const res = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exposed-ports/${port}`, {
    method: 'POST',
    headers: { ...runner.auth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (res.status !== 200) throw new Error(`expose: ${res.status} ${await res.text()}`)
  return ExposedPort.parse(await res.json())
}

async function sandboxToken(runner: TestRunner, id: string): Promise<string> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/tokens`,
    headers: runner.auth,
    payload: {},
  })
  return AccessToken.parse(res.json()).token
}

async function code(res: Response): Promise<string> {
  return ((await res.json()) as { error: { code: string } }).error.code
}

/** Sends raw bytes to the runner and collects everything until it closes or `until` matches. */
function rawExchange(runner: TestRunner, bytes: string, until: RegExp): Promise<string> {
  const url = new URL(baseUrl(runner.app))
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), '127.0.0.1')
    let received = ''
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1')
      if (until.test(received)) {
        socket.destroy()
        resolve(received)
      }
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(received))
    socket.write(bytes)
  })
}

describe('attack: credentials on the port URL', () => {
  it('refuses no credential, another sandbox’s token, another port’s token, a forged and an expired token', async () => {
    let clock = Date.now()
    await using runner = await startRunner({ listen: true, now: () => clock })
    const a = await createSandbox(runner)
    const b = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)

    expect((await fetch(portUrl(runner, a, port, '/echo'))).status).toBe(401)

    const bToken = await sandboxToken(runner, b)
    const withB = await fetch(portUrl(runner, a, port, '/echo'), {
      headers: { authorization: `Bearer ${bToken}` },
    })
    expect(withB.status).toBe(403)
    expect(await code(withB)).toBe('FORBIDDEN')

    const forB = (await expose(runner, b, port)).token
    const otherPort = (await expose(runner, a, port + 1 > 65_535 ? port - 1 : port + 1)).token
    const mine = (await expose(runner, a, port, { ttlMs: 60_000 })).token
    const forged = mine.replace(/\.(\d+)\./, (_m, exp: string) => `.${Number(exp) + 1}.`)
    const tampered = `${mine.slice(0, -2)}${mine.endsWith('AA') ? 'BB' : 'AA'}`
    for (const token of [forB, otherPort, forged, tampered, `${mine}x`]) {
      const viaCookie = await fetch(portUrl(runner, a, port, '/echo'), {
        headers: { cookie: `conch_port_token=${token}` },
      })
      expect(viaCookie.status, token).toBe(401)
      const viaQuery = await fetch(portUrl(runner, a, port, `/echo?conch_port_token=${token}`), {
        redirect: 'manual',
      })
      expect(viaQuery.status, token).toBe(401)
    }
    const ok = await fetch(portUrl(runner, a, port, '/echo'), {
      headers: { cookie: `conch_port_token=${mine}` },
    })
    expect(ok.status).toBe(200)
    clock += 61_000
    const expired = await fetch(portUrl(runner, a, port, '/echo'), {
      headers: { cookie: `conch_port_token=${mine}` },
    })
    expect(expired.status).toBe(401)
  })

  it('refuses a public exposure unless the operator allows it, and then serves without a credential', async () => {
    await using strict = await startRunner({ listen: true })
    const s = await createSandbox(strict)
    const refused = await fetch(`${baseUrl(strict.app)}/v1/sandboxes/${s}/exposed-ports/8080`, {
      method: 'POST',
      headers: { ...strict.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ public: true }),
    })
    expect(refused.status).toBe(403)

    await using open = await startRunner({
      listen: true,
      network: { allowPublicPorts: true, previewDomain: null },
    })
    const id = await createSandbox(open)
    const other = await createSandbox(open)
    const { port } = await startSandboxServer(open, id)
    await expose(open, id, port, { public: true })
    expect((await fetch(portUrl(open, id, port, '/echo'))).status).toBe(200)
    // Public is per port and per sandbox.
    expect((await fetch(portUrl(open, other, port, '/echo'))).status).toBe(401)
  })
})

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
      expect(await code(res)).toBe('UNAUTHORIZED')
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

describe('attack: leave the port through the path or the port number', () => {
  it('sends dot segments to the same sandbox server and never to another route or sandbox', async () => {
    await using runner = await startRunner({ listen: true })
    const a = await createSandbox(runner)
    const b = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, a)
    for (const path of [
      `/v1/sandboxes/${a}/ports/${port}/../../${b}/ports/${port}/echo`,
      `/v1/sandboxes/${a}/ports/${port}/%2e%2e/%2e%2e/${b}/files?path=x`,
      `/v1/sandboxes/${a}/ports/${port}/..%2f..%2f..%2fv1%2fsandboxes`,
    ]) {
      const answer = await rawExchange(
        runner,
        `GET ${path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${runner.apiKey}\r\nconnection: close\r\n\r\n`,
        /\}$/,
      )
      expect(answer).toMatch(/^HTTP\/1\.1 200 /)
      const json = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { url: string }
      expect(json.url).toBe(path.slice(`/v1/sandboxes/${a}/ports/${port}`.length))
    }
  })

  it('refuses port 0, 65536, signs, leading zeros and names with BAD_REQUEST', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    for (const port of ['0', '65536', '-1', '+80', '080', 'abc', '1e3', '99999999999']) {
      const res = await fetch(portUrl(runner, id, port, '/'), { headers: runner.auth })
      expect(res.status, port).toBe(400)
      expect(await code(res)).toBe('BAD_REQUEST')
    }
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

describe('attack: smuggle a second request past the relay', () => {
  it('answers a request with both Content-Length and Transfer-Encoding with 400 and relays nothing', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const smuggled = 'GET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n'
    const answer = await rawExchange(
      runner,
      `POST /v1/sandboxes/${id}/ports/${port}/echo HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${runner.apiKey}\r\n` +
        `content-length: ${4 + smuggled.length}\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
      /\r\n\r\n[\s\S]*$/,
    )
    expect(answer).toMatch(/^HTTP\/1\.1 400 /)
    expect(answer).not.toContain('/smuggled')
  })
})

describe('attack: a hostile sandbox server', () => {
  it('gets the client a 502 for an endless response head, and the runner keeps serving', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port, headersPort } = await startSandboxServer(runner, id)
    const res = await fetch(portUrl(runner, id, headersPort, '/'), { headers: runner.auth })
    expect(res.status).toBe(502)
    expect(await code(res)).toBe('CONNECTION_LOST')
    expect((await fetch(portUrl(runner, id, port, '/echo'), { headers: runner.auth })).status).toBe(200)
  })

  it('stops taking a client’s upload when the sandbox server never reads it', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const total = 512 * 1024 * 1024
    let pulled = 0
    const chunk = new Uint8Array(64 * 1024)
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += chunk.byteLength
        controller.enqueue(chunk)
        if (pulled >= total) controller.close()
      },
    })
    const abort = new AbortController()
    const request = fetch(portUrl(runner, id, port, '/stall'), {
      method: 'POST',
      headers: { ...runner.auth, 'content-type': 'application/octet-stream' },
      body,
      duplex: 'half',
      signal: abort.signal,
    } as RequestInit).catch(() => null)
    // Wait until the upload stops moving: two readings a second apart agree.
    let last = -1
    await vi.waitFor(
      () => {
        const now = pulled
        const stable = now === last
        last = now
        if (!stable) throw new Error('upload still moving')
      },
      { timeout: 60_000, interval: 1_000 },
    )
    abort.abort()
    await request
    // One link window plus socket buffers on the way; never the whole body.
    expect(pulled).toBeLessThan(64 * 1024 * 1024)
    expect((await fetch(portUrl(runner, id, port, '/echo'), { headers: runner.auth })).status).toBe(200)
  })
})

describe('attack: reach another sandbox or the runner from inside a sandbox', () => {
  it('cannot connect to another sandbox’s server or the runner from inside; the relay reaches only its own sandbox', async () => {
    await using runner = await nsRunner({ listen: true })
    const a = await createSandbox(runner)
    const b = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, b)
    const runnerPort = Number(new URL(baseUrl(runner.app)).port)
    const inside = await exec(
      runner,
      a,
      [
        `(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null; echo b=$?`,
        `(exec 3<>/dev/tcp/127.0.0.1/${runnerPort}) 2>/dev/null; echo runner=$?`,
      ].join('; '),
    )
    expect(inside.stdout).toBe('b=1\nrunner=1\n')
    // Through the relay, sandbox A's port is A's loopback: B's server and the runner are not there.
    const viaA = await fetch(portUrl(runner, a, port, '/echo'), { headers: runner.auth })
    expect(viaA.status).toBe(502)
    expect(await code(viaA)).toBe('PORT_NOT_LISTENING')
    const runnerViaA = await fetch(portUrl(runner, a, runnerPort, '/healthz'), { headers: runner.auth })
    expect(await code(runnerViaA)).toBe('PORT_NOT_LISTENING')
    // B's server is reachable through the runner with B's credentials only.
    const bToken = await sandboxToken(runner, b)
    const aToken = await sandboxToken(runner, a)
    expect(
      (await fetch(portUrl(runner, b, port, '/echo'), { headers: { authorization: `Bearer ${bToken}` } }))
        .status,
    ).toBe(200)
    expect(
      (await fetch(portUrl(runner, b, port, '/echo'), { headers: { authorization: `Bearer ${aToken}` } }))
        .status,
    ).toBe(403)
  })
})

describe('attack: reach the host or another sandbox through the relay of a gVisor sandbox', () => {
  it('reaches only the sandbox’s own loopback: the runner’s port and a host listener are not there', async () => {
    await using runner = await gvisorRunner({ listen: true })
    const a = await createSandbox(runner)
    const runnerPort = Number(new URL(baseUrl(runner.app)).port)
    // A listener on the host's loopback, which sandbox code would love to reach.
    const host = createServer((socket) => socket.end('host secret'))
    await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve))
    await using _ = { [Symbol.asyncDispose]: async () => void host.close() }
    const hostPort = (host.address() as AddressInfo).port
    for (const port of [runnerPort, hostPort]) {
      const res = await fetch(portUrl(runner, a, port, '/'), { headers: runner.auth })
      expect(res.status, String(port)).toBe(502)
      expect(await code(res)).toBe('PORT_NOT_LISTENING')
    }
    const inside = await exec(
      runner,
      a,
      `(exec 3<>/dev/tcp/127.0.0.1/${hostPort}) 2>/dev/null; echo host=$?; (exec 3<>/dev/tcp/127.0.0.1/${runnerPort}) 2>/dev/null; echo runner=$?`,
    )
    expect(inside.stdout).toBe('host=1\nrunner=1\n')
  })
})
