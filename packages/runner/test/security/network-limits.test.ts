// The per-sandbox network limits as an attacker meets them: a sandbox (or whoever holds its
// token) that exposes port after port, holds relay connections open, or opens egress
// connections without end gets a typed error at the limit, and another sandbox is unaffected.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { tableResolver } from '../../src/egress-resolver.ts'
import { TokenBucket } from '../../src/sandbox-network-limits.ts'
import { token } from '../lifetime-fixture.ts'
import { exec, nsRunner } from '../namespace-runner.ts'
import { portUrl, startSandboxServer } from '../ports/port-fixture.ts'
import { baseUrl, createSandbox, startRunner, type TestRunner } from '../runner-fixture.ts'

async function expose(runner: TestRunner, id: string, port: number): Promise<Response> {
  return fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exposed-ports/${port}`, {
    method: 'POST',
    headers: { ...runner.auth, 'content-type': 'application/json' },
    body: '{}',
  })
}

async function errorOf(res: Response): Promise<{ code: string; message: string; details?: unknown }> {
  return ((await res.json()) as { error: { code: string; message: string } }).error
}

let outside: Server
let outsidePort = 0
beforeAll(async () => {
  outside = createServer((_req, res) => res.end('outside'))
  await new Promise<void>((resolve) => outside.listen(0, '127.0.0.1', resolve))
  outsidePort = (outside.address() as AddressInfo).port
})
afterAll(() => outside.close())

describe('limit: exposed ports per sandbox', () => {
  it('refuses a new port past the limit with TOO_MANY_EXPOSED_PORTS, and unexposing frees it and revokes its token', async () => {
    await using runner = await startRunner({ listen: true, limits: { maxExposedPortsPerSandbox: 2 } })
    const id = await createSandbox(runner)
    const other = await createSandbox(runner)
    const first = (await (await expose(runner, id, 3000)).json()) as { token: string }
    expect((await expose(runner, id, 3001)).status).toBe(200)
    expect((await expose(runner, id, 3000)).status).toBe(200)
    const refused = await expose(runner, id, 3002)
    expect(refused.status).toBe(429)
    const error = await errorOf(refused)
    expect(error.code).toBe('TOO_MANY_EXPOSED_PORTS')
    expect(error.message).toContain('the limit is 2')
    expect(error.details).toEqual({ limit: 2, value: 2 })
    expect((await expose(runner, other, 3002)).status).toBe(200)
    const unexposed = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exposed-ports/3000`, {
      method: 'DELETE',
      headers: runner.auth,
    })
    expect(unexposed.status).toBe(200)
    const revoked = await fetch(portUrl(runner, id, 3000, '/'), {
      headers: { authorization: `Bearer ${first.token}` },
    })
    expect(revoked.status).toBe(401)
    expect((await expose(runner, id, 3002)).status).toBe(200)
  })
})

describe('attack: unexposing a port of another sandbox', () => {
  it("refuses another sandbox's token and the port's own token, and the port stays exposed", async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const other = await createSandbox(runner)
    const server = await startSandboxServer(runner, id)
    const exposed = (await (await expose(runner, id, server.port)).json()) as { token: string }
    const unexpose = (headers: Record<string, string>) =>
      fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exposed-ports/${server.port}`, {
        method: 'DELETE',
        headers,
      })
    expect((await unexpose(await token(runner, other))).status).toBe(403)
    expect((await unexpose({ authorization: `Bearer ${exposed.token}` })).status).toBe(401)
    expect((await unexpose({})).status).toBe(401)
    const still = await fetch(portUrl(runner, id, server.port, '/echo'), {
      headers: { authorization: `Bearer ${exposed.token}` },
    })
    expect(still.status).toBe(200)
  })
})

describe('limit: relayed connections per sandbox', () => {
  it('answers TOO_MANY_CONNECTIONS past the cap, serves another sandbox meanwhile, and recovers when connections close', async () => {
    await using runner = await startRunner({ listen: true, limits: { maxNetworkConnectionsPerSandbox: 2 } })
    const id = await createSandbox(runner)
    const other = await createSandbox(runner)
    const server = await startSandboxServer(runner, id)
    const otherServer = await startSandboxServer(runner, other, 'other')
    const stalls = [new AbortController(), new AbortController()]
    const pending = stalls.map((c) =>
      fetch(portUrl(runner, id, server.port, '/stall'), { headers: runner.auth, signal: c.signal }).catch(
        () => null,
      ),
    )
    await vi.waitFor(() => expect(runner.app.conch.netLimits.open(id)).toBe(2), { timeout: 10_000 })
    const refused = await fetch(portUrl(runner, id, server.port, '/echo'), { headers: runner.auth })
    expect(refused.status).toBe(429)
    expect((await errorOf(refused)).code).toBe('TOO_MANY_CONNECTIONS')
    const unaffected = await fetch(portUrl(runner, other, otherServer.port, '/echo'), {
      headers: runner.auth,
    })
    expect(unaffected.status).toBe(200)
    for (const c of stalls) c.abort()
    await Promise.all(pending)
    await vi.waitFor(
      async () => {
        const again = await fetch(portUrl(runner, id, server.port, '/echo'), { headers: runner.auth })
        expect(again.status).toBe(200)
      },
      { timeout: 10_000 },
    )
  })
})

describe('limit: egress connections per sandbox', () => {
  it('gives a program past the cap a 429 with TOO_MANY_CONNECTIONS from its proxy, and egress works again once it closes some', async () => {
    await using runner = await nsRunner({
      listen: true,
      limits: { maxNetworkConnectionsPerSandbox: 2 },
      network: {
        allowPublicPorts: false,
        previewDomain: null,
        egressPermit: ['127.0.0.1/32'],
        egressResolver: tableResolver({ 'outside.test': ['127.0.0.1'] }),
      },
    })
    const id = await createSandbox(runner, {
      network: { egress: { allow: [`outside.test:${outsidePort}`] } },
    })
    const r = await exec(
      runner,
      id,
      [
        'exec 3<>/dev/tcp/127.0.0.1/3128 4<>/dev/tcp/127.0.0.1/3128',
        `curl -s http://outside.test:${outsidePort}/; echo " over"`,
        'exec 3>&- 4>&-',
        `for i in $(seq 50); do out=$(curl -s http://outside.test:${outsidePort}/); [ "$out" = outside ] && break; sleep 0.1; done; echo "$out again"`,
      ].join('\n'),
    )
    expect(r.stdout).toMatch(/"code":"TOO_MANY_CONNECTIONS"[\s\S]*\n over\n/)
    expect(r.stdout).toContain('outside again\n')
  })
})

describe('limit: bandwidth per sandbox', () => {
  it('lets takers through while the bucket holds enough, then makes them wait for the debt', () => {
    let now = 0
    const bucket = new TokenBucket(1000, () => now)
    expect(bucket.take(600)).toBeNull()
    expect(bucket.take(400)).toBeNull()
    expect(bucket.take(1)).toBeInstanceOf(Promise)
    now += 2000
    expect(bucket.take(999)).toBeNull()
  })

  it('relays a body intact through a throttled sandbox', async () => {
    await using runner = await startRunner({
      listen: true,
      limits: { sandboxBandwidthBytesPerSecond: 1024 * 1024 },
    })
    const id = await createSandbox(runner)
    const server = await startSandboxServer(runner, id)
    const res = await fetch(portUrl(runner, id, server.port, '/big?mb=2'), { headers: runner.auth })
    expect((await res.arrayBuffer()).byteLength).toBe(2 * 1024 * 1024)
  })
})
