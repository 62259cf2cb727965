// Attacks on credential injection, over real sockets: the proxy serves two sandboxes, each with
// its own CA; `api.test` is a loopback HTTPS host whose certificate chains to a test CA the
// runner is told to trust, and it reflects every request's headers back (the worst case of an
// allowed host). `impostor.test` answers on another port with a certificate from a CA nobody
// trusts. The sandbox is the adversary: it holds only its CA certificate and the proxy.

import type { AddressInfo } from 'node:net'
import { createServer } from 'node:net'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EgressAllowlist } from '../../src/egress-allowlist.ts'
import { EgressCa } from '../../src/egress-ca.ts'
import { EgressCredentials } from '../../src/egress-credentials.ts'
import { EgressProxy } from '../../src/egress-proxy.ts'
import { Redactor, secretsOf } from '../../src/egress-redactor.ts'
import { AddressScreen, tableResolver } from '../../src/egress-resolver.ts'
import { RunnerError } from '../../src/runner-error.ts'
import { httpHost, httpsHost, type TestHost, testCa } from '../egress/credential-servers.ts'
import { httpsViaProxy, httpViaProxy } from '../egress/proxy-client.ts'

const SECRET = 'Bearer sk-live-0123456789abcdef'
const MIRROR_SECRET = 'token mirror-secret-value-42'
let api: TestHost
let gz: TestHost
let impostor: TestHost
let plain: TestHost
let mirror: TestHost
let caA: EgressCa
let caB: EgressCa
let proxyPort = 0
let publicCa: EgressCa
const logs: string[] = []
const server = createServer()

beforeAll(async () => {
  publicCa = await testCa('publicca')
  api = await httpsHost(publicCa, 'api.test')
  gz = await httpsHost(publicCa, 'gz.test', 'gzip')
  impostor = await httpsHost(await testCa('rogueca0'), 'impostor.test')
  plain = await httpsHost(publicCa, 'plain.test')
  mirror = await httpHost()
  const credentials = EgressCredentials.parse(
    JSON.stringify({
      api: { host: 'api.test', headers: { Authorization: SECRET, 'X-Team': 'team-one' } },
      gz: { host: 'gz.test', headers: { Authorization: SECRET } },
      impostor: { host: 'impostor.test', headers: { Authorization: SECRET } },
      mirror: { host: 'mirror.test', headers: { Authorization: MIRROR_SECRET }, insecureHttp: true },
      apiPlain: { host: 'api.test', port: mirror.port, headers: { Authorization: SECRET } },
    }),
  )
  const rules = [
    `api.test:${api.port}`,
    `gz.test:${gz.port}`,
    `impostor.test:${impostor.port}`,
    `plain.test:${plain.port}`,
    `mirror.test:${mirror.port}`,
    `api.test:${mirror.port}`,
  ]
  const allowlist = new EgressAllowlist(rules)
  caA = await EgressCa.create('sb_aaaaaaaa')
  caB = await EgressCa.create('sb_bbbbbbbb')
  const lines = { write: (line: string) => logs.push(line) }
  const proxy = new EgressProxy({
    resolver: tableResolver({
      'api.test': ['127.0.0.1'],
      'gz.test': ['127.0.0.1'],
      'impostor.test': ['127.0.0.1'],
      'plain.test': ['127.0.0.1'],
      'mirror.test': ['127.0.0.1'],
    }),
    screen: new AddressScreen(['127.0.0.1/32']),
    logger: pino({ level: 'info' }, lines),
    upstreamCa: [publicCa.certPem],
  })
  const a = {
    sandboxId: 'sb_aaaaaaaa',
    allowlist,
    injection: { credentials: credentials.resolve(['api', 'gz', 'impostor', 'mirror'], allowlist), ca: caA },
  }
  const b = {
    sandboxId: 'sb_bbbbbbbb',
    allowlist,
    injection: { credentials: credentials.resolve(['api'], allowlist), ca: caB },
  }
  // Two listeners stand for the two sandboxes' relayed connections.
  server.on('connection', (socket) => proxy.accept(socket, socket.localPort === proxyPort ? a : b))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  proxyPort = (server.address() as AddressInfo).port
  const second = createServer((socket) => proxy.accept(socket, b))
  await new Promise<void>((resolve) => second.listen(0, '127.0.0.1', resolve))
  portB = (second.address() as AddressInfo).port
  closers.push(() => second.close())
})
let portB = 0
const closers: (() => void)[] = []
afterAll(() => {
  for (const host of [api, gz, impostor, plain, mirror]) host.close()
  server.close()
  for (const c of closers) c()
})

describe('credential injection', () => {
  it('adds the operator’s headers on the way out, over the real host’s verified TLS', async () => {
    const before = api.seen.length
    const r = await httpsViaProxy(proxyPort, `api.test:${api.port}`, { ca: caA.certPem, path: '/v1/me' })
    expect(r.status).toBe(200)
    expect(r.issuer).toBe('conch egress CA sb_aaaaaaaa')
    expect(api.seen.length).toBe(before + 1)
    expect(api.seen.at(-1)?.authorization).toBe(SECRET)
    expect(api.seen.at(-1)?.['x-team']).toBe('team-one')
    expect(api.seen.at(-1)?.host).toBe(`api.test:${api.port}`)
  })

  it('replaces an Authorization header the sandbox sends with the operator’s', async () => {
    await httpsViaProxy(proxyPort, `api.test:${api.port}`, {
      ca: caA.certPem,
      headers: { authorization: 'Bearer forged', host: 'evil.test' },
    })
    expect(api.seen.at(-1)?.authorization).toBe(SECRET)
    expect(api.seen.at(-1)?.host).toBe(`api.test:${api.port}`)
  })

  it('leaves a host without credentials a plain tunnel: the sandbox sees the host’s own certificate', async () => {
    const r = await httpsViaProxy(proxyPort, `plain.test:${plain.port}`, { ca: publicCa.certPem })
    expect(r.status).toBe(200)
    expect(r.issuer).toBe('conch egress CA sb_publicca')
    expect(plain.seen.at(-1)?.authorization).toBeUndefined()
  })

  it('logs the credential’s name and never its value', () => {
    const all = logs.join('')
    expect(all).toContain('"credentials":["api"]')
    expect(all).not.toContain('sk-live')
  })
})

describe('attack: read the injected secret', () => {
  it('gets only [redacted] back from a host that reflects the request, in headers and body', async () => {
    const r = await httpsViaProxy(proxyPort, `api.test:${api.port}`, {
      ca: caA.certPem,
      path: '/echo',
      headers: { 'x-mine': 'sandbox-own-value' },
    })
    expect(r.body).not.toContain('sk-live')
    expect(JSON.parse(r.body).headers.authorization).toBe('[redacted]')
    expect(r.headers['x-echo-auth']).toBe('[redacted]')
    // Every injected value counts as secret; what the sandbox sent itself comes back as sent.
    expect(JSON.parse(r.body).headers['x-team']).toBe('[redacted]')
    expect(JSON.parse(r.body).headers['x-mine']).toBe('sandbox-own-value')
  })

  it('refuses a body the host compressed anyway, since it cannot be screened', async () => {
    const r = await httpsViaProxy(proxyPort, `gz.test:${gz.port}`, { ca: caA.certPem })
    expect(r.status).toBe(502)
    expect(r.body).toContain('gzip-encoded')
    expect(gz.seen.at(-1)?.['accept-encoding']).toBe('identity')
  })

  it('redacts a secret split across chunks of the body', async () => {
    const redactor = new Redactor(secretsOf([SECRET]))
    const out: Buffer[] = []
    redactor.on('data', (c: Buffer) => out.push(c))
    const text = `a${SECRET}b${SECRET.slice(7)}c`
    for (const piece of [text.slice(0, 9), text.slice(9, 20), text.slice(20, 40), text.slice(40)])
      redactor.write(Buffer.from(piece))
    redactor.end()
    await new Promise((resolve) => redactor.on('end', resolve))
    expect(Buffer.concat(out).toString()).toBe('a[redacted]b[redacted]c')
  })

  it('sends nothing to a host whose certificate does not verify, and says so', async () => {
    const r = await httpsViaProxy(proxyPort, `impostor.test:${impostor.port}`, { ca: caA.certPem })
    expect(r.status).toBe(502)
    expect(r.body).toContain('did not verify')
    expect(r.body).not.toContain('sk-live')
    expect(impostor.seen).toEqual([])
  })

  it('gives a plain-HTTP request the credential only when the operator allowed it in clear', async () => {
    const allowed = await httpViaProxy(proxyPort, `http://mirror.test:${mirror.port}/simple`)
    expect(mirror.seen.at(-1)?.authorization).toBe(MIRROR_SECRET)
    expect(allowed.body).not.toContain('mirror-secret')
    // `apiPlain` was not granted to this sandbox, and `api` is TLS-only: nothing is added.
    await httpViaProxy(proxyPort, `http://api.test:${mirror.port}/clear`)
    expect(mirror.seen.at(-1)?.authorization).toBeUndefined()
  })
})

describe('attack: use another sandbox’s CA', () => {
  it('shows each sandbox leaves signed by its own CA, so a client trusting another’s refuses', async () => {
    const b = await httpsViaProxy(portB, `api.test:${api.port}`, { ca: caB.certPem })
    expect(b.issuer).toBe('conch egress CA sb_bbbbbbbb')
    await expect(httpsViaProxy(portB, `api.test:${api.port}`, { ca: caA.certPem })).rejects.toThrow(
      /self-signed|unable to verify|issuer/i,
    )
  })

  it('keeps the CA key in the runner: what a sandbox gets is a certificate only', () => {
    expect(caA.certPem).toContain('BEGIN CERTIFICATE')
    expect(caA.certPem).not.toContain('PRIVATE KEY')
  })
})

describe('attack: grant credentials that do not fit the policy', () => {
  const credentials = EgressCredentials.parse(
    JSON.stringify({ api: { host: 'api.test', headers: { Authorization: SECRET } } }),
  )

  it('refuses a credential for a host that is not on the allowlist, without its value', () => {
    let error: unknown
    try {
      credentials.resolve(['api'], new EgressAllowlist(['other.test']))
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(RunnerError)
    expect((error as RunnerError).code).toBe('BAD_REQUEST')
    expect((error as RunnerError).message).toContain('not on this sandbox')
    expect((error as RunnerError).message).not.toContain('sk-live')
  })

  it('refuses a name the operator did not define', () => {
    expect(() => credentials.resolve(['nope'], new EgressAllowlist(['api.test']))).toThrow(
      /no egress credential named "nope"/,
    )
  })

  it('refuses a credentials file with a wildcard host, and never echoes a value in the error', () => {
    expect(() =>
      EgressCredentials.parse(JSON.stringify({ w: { host: '*.test', headers: { a: 'sk-live-xyz123' } } })),
    ).toThrow(/not a DNS name/)
    expect(() =>
      EgressCredentials.parse(
        JSON.stringify({ w: { host: 'a.test', headers: { 'bad header': 'sk-live-xyz123' } } }),
      ),
    ).toThrow(/invalid at w\.headers/)
  })
})
