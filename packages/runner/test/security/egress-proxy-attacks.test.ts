// Attacks on the egress proxy, driven over real sockets: the "internet" is an HTTP server on
// this host's loopback that the test resolver names `outside.test`, and the operator permit
// opens 127.0.0.1/32 (as an operator would open an internal mirror). Everything else keeps the
// production rules: names not listed, ports not listed, address literals, numeric and IPv6
// forms, metadata and loopback answers, the runner's own port, redirects and Host headers.
import { createServer as createHttpServer, request, type Server } from 'node:http'
import { type AddressInfo, connect, createServer } from 'node:net'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EgressAllowlist } from '../../src/egress-allowlist.ts'
import { EgressProxy } from '../../src/egress-proxy.ts'
import { AddressScreen, tableResolver } from '../../src/egress-resolver.ts'

let outside: Server
let outsidePort = 0
let selfPort = 0
let proxyServer: ReturnType<typeof createServer>
let proxyPort = 0
const seen: { url: string; host: string }[] = []

function listen(server: {
  listen: (port: number, host: string, cb: () => void) => void
  address: () => unknown
}): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  )
}

beforeAll(async () => {
  outside = createHttpServer((req, res) => {
    seen.push({ url: req.url ?? '', host: req.headers.host ?? '' })
    if (req.url === '/redirect') {
      res.writeHead(302, { location: `http://127.0.0.1:${outsidePort}/secret` })
      res.end()
      return
    }
    res.end(`outside ${req.url} host=${req.headers.host}`)
  })
  outsidePort = await listen(outside)
  // A stand-in for the runner's own port: the allowlist names it, and it stays refused.
  const self = createServer((s) => s.destroy())
  selfPort = await listen(self)
  const proxy = new EgressProxy({
    resolver: tableResolver({
      'outside.test': ['127.0.0.1'],
      'metadata.test': ['169.254.169.254'],
      'private.test': ['10.1.2.3'],
      'mapped.test': ['::ffff:127.0.0.2'],
      'both.test': ['169.254.169.254', '127.0.0.1'],
    }),
    screen: new AddressScreen(['127.0.0.1/32'], [`127.0.0.1:${selfPort}`]),
    logger: pino({ level: 'silent' }),
  })
  const allowlist = new EgressAllowlist([
    `outside.test:${outsidePort}`,
    `*.wild.test:${outsidePort}`,
    `metadata.test:${outsidePort}`,
    'metadata.test:80',
    `private.test:${outsidePort}`,
    `mapped.test:${outsidePort}`,
    `both.test:${outsidePort}`,
    `outside.test:${selfPort}`,
  ])
  proxyServer = createServer((socket) => proxy.accept(socket, { sandboxId: 'sb_test0000', allowlist }))
  proxyPort = await listen(proxyServer)
})

afterAll(() => {
  outside.close()
  proxyServer.close()
})

/** Sends a CONNECT and returns the proxy's status line (and, when tunnelled, a GET's answer). */
function tunnel(authority: string, host = authority): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(proxyPort, '127.0.0.1')
    let received = ''
    let tunnelled = false
    socket.on('data', (chunk) => {
      received += chunk.toString()
      if (!tunnelled && received.startsWith('HTTP/1.1 200')) {
        tunnelled = true
        received = ''
        socket.write(`GET /via-tunnel HTTP/1.1\r\nhost: outside.test\r\nconnection: close\r\n\r\n`)
      }
    })
    socket.on('error', reject)
    socket.on('close', () => {
      const status = tunnelled ? 200 : Number(/^HTTP\/1\.1 (\d+)/.exec(received)?.[1] ?? 0)
      resolve({ status, body: received })
    })
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${host}\r\n\r\n`)
  })
}

/** Sends a plain-HTTP proxy request for `url`, with an optional Host header. */
function viaProxy(url: string, host?: string): Promise<{ status: number; body: string; location?: string }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: proxyPort,
      path: url,
      headers: host ? { host } : {},
      setHost: !host,
    })
    req.on('response', (res) => {
      let body = ''
      res.on('data', (c) => {
        body += c
      })
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body,
          ...(res.headers.location ? { location: res.headers.location } : {}),
        }),
      )
    })
    req.on('error', reject)
    req.end()
  })
}

describe('egress: what the allowlist admits', () => {
  it('tunnels CONNECT and forwards plain HTTP to a listed name, at the address the runner resolved', async () => {
    const t = await tunnel(`outside.test:${outsidePort}`)
    expect(t.status).toBe(200)
    expect(t.body).toContain('outside /via-tunnel')
    const h = await viaProxy(`http://outside.test:${outsidePort}/page?q=1`)
    expect(h.status).toBe(200)
    expect(h.body).toBe(`outside /page?q=1 host=outside.test:${outsidePort}`)
    expect((await viaProxy(`http://a.b.wild.test:${outsidePort}/w`)).status).toBe(502)
  })
})

describe('attack: leave through the egress proxy', () => {
  it('refuses a name that is not listed, a listed name on another port, and the wildcard’s apex', async () => {
    expect((await tunnel(`evil.test:${outsidePort}`)).status).toBe(403)
    expect((await tunnel('outside.test:22')).status).toBe(403)
    expect((await tunnel(`wild.test:${outsidePort}`)).status).toBe(403)
    expect((await viaProxy(`http://evil.test:${outsidePort}/`)).status).toBe(403)
  })

  it('refuses address literals in every form, IPv4, numeric, IPv6 and IPv4-mapped', async () => {
    for (const authority of [
      `127.0.0.1:${outsidePort}`,
      `2130706433:${outsidePort}`,
      `0x7f000001:${outsidePort}`,
      `127.1:${outsidePort}`,
      `0177.0.0.1:${outsidePort}`,
      `[::1]:${outsidePort}`,
      `[::ffff:127.0.0.1]:${outsidePort}`,
      `[::ffff:7f00:1]:${outsidePort}`,
      `localhost:${outsidePort}`,
    ]) {
      const t = await tunnel(authority)
      expect([400, 403], authority).toContain(t.status)
    }
    for (const url of [
      `http://127.0.0.1:${outsidePort}/`,
      `http://2130706433:${outsidePort}/`,
      `http://[::1]:${outsidePort}/`,
      `http://[::ffff:127.0.0.1]:${outsidePort}/`,
    ]) {
      expect([400, 403], url).toContain((await viaProxy(url)).status)
    }
  })

  it('refuses listed names that resolve to metadata, private or mapped loopback addresses outside the permit', async () => {
    expect((await tunnel(`metadata.test:${outsidePort}`)).status).toBe(403)
    expect((await viaProxy('http://metadata.test/latest/meta-data/')).status).toBe(403)
    expect((await tunnel(`private.test:${outsidePort}`)).status).toBe(403)
    expect((await tunnel(`mapped.test:${outsidePort}`)).status).toBe(403)
    // A name with a refused and a permitted answer connects only to the permitted one.
    expect((await tunnel(`both.test:${outsidePort}`)).status).toBe(200)
  })

  it('refuses the runner’s own port even when a listed name resolves to a permitted address', async () => {
    const t = await tunnel(`outside.test:${selfPort}`)
    expect(t.status).toBe(403)
    expect(t.body).toContain('runner itself')
  })

  it('sends the URL’s host, not a conflicting Host header, and refuses an unlisted URL behind a listed Host', async () => {
    const mismatch = await viaProxy(`http://outside.test:${outsidePort}/h`, 'evil.test')
    expect(mismatch.body).toBe(`outside /h host=outside.test:${outsidePort}`)
    expect((await viaProxy(`http://evil.test:${outsidePort}/h`, `outside.test:${outsidePort}`)).status).toBe(
      403,
    )
    expect((await viaProxy('/origin-form', `outside.test:${outsidePort}`)).status).toBe(400)
  })

  it('decides a CONNECT by its target, never by a Host header that names a listed host', async () => {
    expect((await tunnel(`evil.test:${outsidePort}`, `outside.test:${outsidePort}`)).status).toBe(403)
    expect((await tunnel(`127.0.0.1:${outsidePort}`, `outside.test:${outsidePort}`)).status).toBe(403)
    const listed = await tunnel(`outside.test:${outsidePort}`, 'evil.test:80')
    expect(listed.status).toBe(200)
  })

  it('refuses the target of a redirect that leaves the allowlist', async () => {
    const first = await viaProxy(`http://outside.test:${outsidePort}/redirect`)
    expect(first.status).toBe(302)
    const before = seen.length
    const followed = await viaProxy(first.location ?? '')
    expect(followed.status).toBe(403)
    expect(seen.length).toBe(before)
  })
})
