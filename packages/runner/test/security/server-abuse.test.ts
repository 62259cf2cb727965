// Attacks on the runner's availability over plain TCP and HTTP: thousands of half-open
// requests, connections that never authenticate, headers or bodies that never finish. Each
// attack must be bounded by a configured cap or timeout, and /healthz must keep answering.
import { request } from 'node:http'
import { connect, type Socket } from 'node:net'
import { describe, expect, it, vi } from 'vitest'
import { connectionCap, parseOpenFileLimit } from '../../src/open-file-limit.ts'
import { startRunner, type TestRunner } from '../runner-fixture.ts'

/** Loopback addresses: all of 127/8 reaches the runner, and each one is a separate client. */
const ATTACKER = '127.0.0.1'
const VICTIM = '127.0.0.2'

function port(runner: TestRunner): number {
  const address = runner.app.server.address()
  if (!address || typeof address === 'string') throw new Error('runner is not listening on TCP')
  return address.port
}

/** A raw client socket with everything it received and a promise of its close. */
interface RawClient {
  socket: Socket
  received: () => string
  closed: Promise<void>
}

function rawClient(runner: TestRunner, localAddress = ATTACKER): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const socket = connect({ host: '127.0.0.1', port: port(runner), localAddress })
    socket.on('data', (chunk) => chunks.push(chunk))
    const closed = new Promise<void>((done) => socket.once('close', () => done()))
    socket.on('error', () => {})
    socket.once('connect', () =>
      resolve({ socket, closed, received: () => Buffer.concat(chunks).toString('latin1') }),
    )
    socket.once('error', reject)
  })
}

/** GET /healthz on a fresh connection from `localAddress`. */
function health(runner: TestRunner, localAddress: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: port(runner), path: '/healthz', localAddress, agent: false },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          body += chunk
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

/** Waits until `client` has received a whole response with a `\r\n\r\n` and `n` body bytes or closed. */
function responseOf(client: RawClient): Promise<string> {
  return new Promise((resolve) => {
    const check = (): void => {
      const text = client.received()
      const end = text.indexOf('\r\n\r\n')
      const length = /content-length: (\d+)/i.exec(text)
      if (end >= 0 && length && text.length >= end + 4 + Number(length[1])) {
        client.socket.off('data', check)
        resolve(text)
      }
    }
    client.socket.on('data', check)
    void client.closed.then(() => resolve(client.received()))
    check()
  })
}

describe('attack: exhaust connections with half-open requests', () => {
  it('caps one client, keeps /healthz answering for others, and closes every half-open request', async () => {
    await using runner = await startRunner({
      listen: true,
      limits: { maxConnections: 400, maxConnectionsPerClient: 100, unauthenticatedTimeoutMs: 2_000 },
    })
    const attack = await Promise.all(
      Array.from({ length: 2_000 }, async () => {
        const client = await rawClient(runner)
        client.socket.write('GET /healthz HTTP/1.1\r\nHost: runner\r\n')
        return client
      }),
    )
    // The attacker holds its whole share; another client is still served.
    const during = await health(runner, VICTIM)
    expect(during.status).toBe(200)
    expect(JSON.parse(during.body)).toMatchObject({ ok: true })

    await Promise.all(attack.map((c) => c.closed))
    const refused = attack.filter((c) => c.received().startsWith('HTTP/1.1 429'))
    expect(refused.length).toBeGreaterThanOrEqual(2_000 - 100 - 400)
    for (const c of refused) expect(c.received()).toContain('"code":"RATE_LIMITED"')
    // Once the runner has closed the half-open requests, the attacker's own address is served again.
    await vi.waitFor(async () => expect((await health(runner, ATTACKER)).status).toBe(200))
  })
})

describe('attack: hold connections open without credentials', () => {
  it('closes a connection that never authenticates and keeps an authenticated one', async () => {
    await using runner = await startRunner({ listen: true, limits: { unauthenticatedTimeoutMs: 300 } })
    const silent = await rawClient(runner)
    const publicOnly = await rawClient(runner)
    publicOnly.socket.write('GET /healthz HTTP/1.1\r\nHost: runner\r\n\r\n')
    const authed = await rawClient(runner)
    const get = `GET /v1/sandboxes HTTP/1.1\r\nHost: runner\r\nAuthorization: ${runner.auth.authorization}\r\n\r\n`
    authed.socket.write(get)
    expect(await responseOf(authed)).toMatch(/^HTTP\/1.1 200 /)

    await silent.closed
    await publicOnly.closed
    expect(publicOnly.received()).toMatch(/^HTTP\/1.1 200 /)
    expect(authed.socket.destroyed).toBe(false)
    const before = authed.received().length
    authed.socket.write(get)
    await new Promise<void>((resolve) => authed.socket.once('data', () => resolve()))
    expect(authed.received().slice(before)).toMatch(/^HTTP\/1.1 200 /)
    authed.socket.destroy()
  })

  it('refuses a client beyond its connection cap with a RATE_LIMITED answer', async () => {
    await using runner = await startRunner({ listen: true, limits: { maxConnectionsPerClient: 2 } })
    const kept = [await rawClient(runner), await rawClient(runner)]
    const third = await rawClient(runner)
    await third.closed
    expect(third.received()).toMatch(/^HTTP\/1.1 429 /)
    expect(third.received()).toContain('"code":"RATE_LIMITED"')
    expect(third.received()).toContain('limit is 2')
    expect((await health(runner, VICTIM)).status).toBe(200)
    for (const c of kept) c.socket.destroy()
    // The runner sees the two closes a moment after the client does.
    await vi.waitFor(async () => expect((await health(runner, ATTACKER)).status).toBe(200))
  })
})

describe('attack: requests that never finish on an authenticated connection', () => {
  it('closes a connection whose next request headers never end', async () => {
    await using runner = await startRunner({
      listen: true,
      limits: { headersTimeoutMs: 300, requestTimeoutMs: 300 },
    })
    const client = await rawClient(runner)
    client.socket.write(
      `GET /v1/sandboxes HTTP/1.1\r\nHost: runner\r\nAuthorization: ${runner.auth.authorization}\r\n\r\n`,
    )
    const first = await responseOf(client)
    expect(first).toMatch(/^HTTP\/1.1 200 /)
    client.socket.write('GET /v1/sandboxes HTTP/1.1\r\nHost: runner\r\n')
    await client.closed
    expect(client.received().slice(first.length)).toMatch(/^HTTP\/1.1 408 /)
  })

  it('closes a connection whose request body never ends', async () => {
    await using runner = await startRunner({
      listen: true,
      limits: { headersTimeoutMs: 300, requestTimeoutMs: 300 },
    })
    const client = await rawClient(runner)
    client.socket.write(
      `POST /v1/sandboxes HTTP/1.1\r\nHost: runner\r\nAuthorization: ${runner.auth.authorization}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"me`,
    )
    await client.closed
    expect(client.received()).toMatch(/^HTTP\/1.1 408 /)
    expect(runner.app.conch.manager.list()).toHaveLength(0)
  })
})

describe('the connection cap fits the open-file limit', () => {
  it('reads the soft limit and lowers the cap below it', () => {
    const text = [
      'Limit                     Soft Limit           Hard Limit           Units',
      'Max open files            1024                 4096                 files',
    ].join('\n')
    expect(parseOpenFileLimit(text)).toBe(1024)
    expect(parseOpenFileLimit('Max open files  unlimited  unlimited  files\n')).toBeNull()
    expect(connectionCap(4_096, 1024, 32)).toBe(1024 - 64 - 32 * 8)
    expect(connectionCap(100, 1024, 32)).toBe(100)
    expect(connectionCap(4_096, null, 32)).toBe(4_096)
    expect(connectionCap(4_096, 100, 32)).toBe(16)
  })
})
