// Attacks on the port relay: other sandboxes' credentials, forged and expired tokens, paths
// that try to leave the port, bad port numbers, request smuggling, hostile sandbox servers
// (endless headers, never reading), and reaching another sandbox, the runner or the host from
// inside. What a browser meets (cookies, page policy, credentials that end) is in
// port-browser-attacks.test.ts.
import { type AddressInfo, connect, createServer } from 'node:net'
import { describe, expect, it, vi } from 'vitest'
import { gvisorRunner } from '../gvisor-runner.ts'
import { exec, nsRunner } from '../namespace-runner.ts'
import { errorCode, expose, portUrl, sandboxToken, startSandboxServer } from '../ports/port-fixture.ts'
import { rootlessRunner } from '../rootless-runner.ts'
import { baseUrl, createSandbox, startRunner, type TestRunner } from '../runner-fixture.ts'

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
    expect(await errorCode(withB)).toBe('FORBIDDEN')

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
      expect(await errorCode(res)).toBe('BAD_REQUEST')
    }
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
    expect(await errorCode(res)).toBe('CONNECTION_LOST')
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
    expect(await errorCode(viaA)).toBe('PORT_NOT_LISTENING')
    const runnerViaA = await fetch(portUrl(runner, a, runnerPort, '/healthz'), { headers: runner.auth })
    expect(await errorCode(runnerViaA)).toBe('PORT_NOT_LISTENING')
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
      expect(await errorCode(res)).toBe('PORT_NOT_LISTENING')
    }
    const inside = await exec(
      runner,
      a,
      `(exec 3<>/dev/tcp/127.0.0.1/${hostPort}) 2>/dev/null; echo host=$?; (exec 3<>/dev/tcp/127.0.0.1/${runnerPort}) 2>/dev/null; echo runner=$?`,
    )
    expect(inside.stdout).toBe('host=1\nrunner=1\n')
  })
})

describe('attack: reach the host through the relay of a rootless sandbox', () => {
  it('reaches only the sandbox’s own loopback: the runner’s port and a host listener are not there', async () => {
    await using runner = await rootlessRunner()
    const { id } = await runner.create()
    const runnerPort = Number(new URL(runner.url).port)
    const host = createServer((socket) => socket.end('host secret'))
    await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve))
    await using _ = { [Symbol.asyncDispose]: async () => void host.close() }
    const hostPort = (host.address() as AddressInfo).port
    for (const port of [runnerPort, hostPort]) {
      const res = await fetch(`${runner.url}/v1/sandboxes/${id}/ports/${port}/`, {
        headers: { authorization: `Bearer ${runner.apiKey}` },
      })
      expect(res.status, String(port)).toBe(502)
      expect(await errorCode(res)).toBe('PORT_NOT_LISTENING')
    }
    const inside = await runner.exec(
      id,
      `(exec 3<>/dev/tcp/127.0.0.1/${hostPort}) 2>/dev/null; echo host=$?; (exec 3<>/dev/tcp/127.0.0.1/${runnerPort}) 2>/dev/null; echo runner=$?`,
    )
    expect(inside.stdout).toBe('host=1\nrunner=1\n')
  })
})
