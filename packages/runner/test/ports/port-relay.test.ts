// The port relay with the real agent: HTTP, uploads, streaming, SSE, upgrades and discovery.
import { request } from 'node:http'
import { connect } from 'node:net'
import { ExposedPort, PortEvent, PortList } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { WebSocket } from 'ws'
import { PATH_FORM_CSP } from '../../src/plugins/ports-plugin.ts'
import { baseUrl, createSandbox, startRunner } from '../runner-fixture.ts'
import { portUrl, sha256, startSandboxServer } from './port-fixture.ts'

describe('port relay (real agent)', () => {
  it('relays a GET and a 50 MB POST, keeps the API key from the sandbox server and strips its cookie', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)

    const get = await fetch(portUrl(runner, id, port, '/echo/a%20b?x=1'), {
      headers: { ...runner.auth, cookie: 'conch_port_token=cpt_x; mine=2' },
    })
    expect(get.status).toBe(200)
    const echoed = (await get.json()) as { url: string; headers: Record<string, string> }
    expect(echoed.url).toBe('/echo/a%20b?x=1')
    expect(echoed.headers.authorization).toBeUndefined()
    expect(echoed.headers.cookie).toBe('mine=2')
    expect(echoed.headers.host).toBe(`localhost:${port}`)
    expect(echoed.headers['x-forwarded-prefix']).toBe(`/v1/sandboxes/${id}/ports/${port}`)
    expect(get.headers.get('content-security-policy')).toBe(PATH_FORM_CSP)
    expect(get.headers.getSetCookie()).toEqual([`app=1; Path=/v1/sandboxes/${id}/ports/${port}/`])

    const body = Buffer.alloc(50 * 1024 * 1024)
    for (let i = 0; i < body.length; i += 4096) body[i] = i % 251
    const post = await fetch(portUrl(runner, id, port, '/upload'), {
      method: 'POST',
      headers: runner.auth,
      body,
    })
    expect(await post.json()).toEqual({ bytes: body.length, sha256: sha256(body) })
  })

  it('reuses a kept-alive connection to the sandbox server for the next request', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const remote = async (): Promise<number> => {
      const res = await fetch(portUrl(runner, id, port, '/echo'), { headers: runner.auth })
      return ((await res.json()) as { remotePort: number }).remotePort
    }
    const first = await remote()
    expect(await remote()).toBe(first)
  })

  it('opens a new connection when the sandbox server closed the kept-alive one', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    for (let i = 0; i < 5; i++) {
      const res = await fetch(portUrl(runner, id, port, '/close-after'), { headers: runner.auth })
      expect(res.status, `request ${i}: ${res.status === 200 ? '' : await res.clone().text()}`).toBe(200)
      expect(await res.text()).toBe('closing')
    }
  })

  it('streams a large response and server-sent events as they come', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const big = await fetch(portUrl(runner, id, port, '/big?mb=20'), { headers: runner.auth })
    const bytes = Buffer.from(await big.arrayBuffer())
    expect(bytes.length).toBe(20 * 1024 * 1024)
    expect(bytes.every((b) => b === 97)).toBe(true)

    const sse = await fetch(portUrl(runner, id, port, '/sse'), { headers: runner.auth })
    expect(sse.headers.get('content-type')).toBe('text/event-stream')
    const events: string[] = []
    const decoder = new TextDecoder()
    for await (const chunk of sse.body as unknown as AsyncIterable<Uint8Array>)
      events.push(decoder.decode(chunk))
    expect(events.join('')).toBe('data: tick 1\n\ndata: tick 2\n\ndata: tick 3\n\n')
  })

  it('relays an Upgrade byte for byte after the sandbox server answers 101', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const url = new URL(portUrl(runner, id, port, '/ws'))
    const socket = connect(Number(url.port), '127.0.0.1')
    await using _ = { [Symbol.asyncDispose]: async () => void socket.destroy() }
    socket.write(
      `GET ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${runner.apiKey}\r\nconnection: Upgrade\r\nupgrade: echo\r\n\r\n`,
    )
    let received = ''
    const head = await new Promise<string>((resolve) => {
      socket.on('data', (chunk) => {
        received += chunk.toString('latin1')
        if (received.includes('\r\n\r\n') && !received.includes('ping-pong')) {
          const [h] = received.split('\r\n\r\n')
          resolve(h ?? '')
        }
      })
    })
    expect(head).toMatch(/^HTTP\/1\.1 101 /)
    expect(head.toLowerCase()).toContain('upgrade: echo')
    socket.write('ping-pong')
    await new Promise<void>((resolve) => {
      const check = (): void => {
        if (received.endsWith('ping-pong')) resolve()
      }
      socket.on('data', check)
      check()
    })
    expect(received.endsWith('\r\n\r\nping-pong')).toBe(true)
  })

  it('echoes WebSocket messages through the relay, with a port token in the query', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const res = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exposed-ports/${port}`, {
      method: 'POST',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      body: '{}',
    })
    const { token } = ExposedPort.parse(await res.json())
    const ws = new WebSocket(
      `${portUrl(runner, id, port, '/ws').replace('http', 'ws')}?conch_port_token=${token}`,
    )
    await using _ = { [Symbol.asyncDispose]: async () => ws.close() }
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    })
    const echoed = (message: string | Buffer): Promise<Buffer> =>
      new Promise((resolve) => {
        ws.once('message', (data) => resolve(data as Buffer))
        ws.send(message)
      })
    expect((await echoed('hello through the runner')).toString()).toBe('hello through the runner')
    const bytes = Buffer.from([0, 1, 2, 255, 254])
    expect(Buffer.compare(await echoed(bytes), bytes)).toBe(0)
  })

  it('lists listening ports and answers PORT_NOT_LISTENING for a closed one', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const list = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/ports`, { headers: runner.auth })
    const ports = PortList.parse(await list.json()).ports
    expect(ports).toContainEqual({ port, address: '127.0.0.1', family: 'ipv4' })

    const closed = await fetch(portUrl(runner, id, 1, '/'), { headers: runner.auth })
    expect(closed.status).toBe(502)
    expect(((await closed.json()) as { error: { code: string } }).error.code).toBe('PORT_NOT_LISTENING')
  })

  it('trades a port token in the query for a cookie scoped to the port, then serves with the cookie', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const res = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exposed-ports/${port}`, {
      method: 'POST',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      body: '{}',
    })
    const exposed = ExposedPort.parse(await res.json())
    expect(exposed.public).toBe(false)
    const first = await fetch(`${baseUrl(runner.app)}${exposed.path}`, { redirect: 'manual' })
    expect(first.status).toBe(303)
    expect(first.headers.get('location')).toBe(`/v1/sandboxes/${id}/ports/${port}/`)
    const cookie = first.headers.getSetCookie()[0] ?? ''
    expect(cookie).toContain('HttpOnly')
    expect(cookie).toContain(`Path=/v1/sandboxes/${id}/ports/${port}/`)
    const pair = cookie.split(';')[0] ?? ''
    const page = await fetch(portUrl(runner, id, port, '/echo'), { headers: { cookie: pair } })
    expect(page.status).toBe(200)
    expect(((await page.json()) as { headers: Record<string, string> }).headers.cookie).toBeUndefined()
  })

  it('serves a port on its preview host, with every path the app’s and no API route', async () => {
    await using runner = await startRunner({
      listen: true,
      network: { allowPublicPorts: false, previewDomain: 'preview.test' },
    })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const get = (host: string, path: string): Promise<{ status: number; body: string; csp?: string }> =>
      new Promise((resolve, reject) => {
        const url = new URL(baseUrl(runner.app))
        const req = request({
          host: '127.0.0.1',
          port: url.port,
          path,
          setHost: false,
          headers: { host, authorization: `Bearer ${runner.apiKey}` },
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
              ...(res.headers['content-security-policy']
                ? { csp: String(res.headers['content-security-policy']) }
                : {}),
            }),
          )
        })
        req.on('error', reject)
        req.end()
      })
    const host = `${port}-${id.toLowerCase()}.preview.test`
    const page = await get(host, '/echo?x=1')
    expect(page.status).toBe(200)
    expect((JSON.parse(page.body) as { url: string }).url).toBe('/echo?x=1')
    expect(page.csp).toBeUndefined()
    const api = await get(host, '/v1/sandboxes')
    expect((JSON.parse(api.body) as { url: string }).url).toBe('/v1/sandboxes')
    const unknown = await get(`${port}-sb_nosuchsandbox1.preview.test`, '/')
    expect(unknown.status).toBe(404)
  })
})

describe('a sandbox that stops', () => {
  it('ends the relayed responses it was sending', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const { port } = await startSandboxServer(runner, id)
    const res = await fetch(portUrl(runner, id, port, '/big?mb=100000'), { headers: runner.auth })
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let received = (await reader.read()).value?.byteLength ?? 0
    expect(received).toBeGreaterThan(0)
    const destroyed = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}`, {
      method: 'DELETE',
      headers: runner.auth,
    })
    expect(destroyed.status).toBe(200)
    const ended = await (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read()
          if (done) return 'end'
          received += value.byteLength
        }
      } catch {
        return 'error'
      }
    })()
    expect(['end', 'error']).toContain(ended)
    expect(received).toBeLessThan(100_000 * 1024 * 1024)
  })
})

describe('port discovery events', () => {
  it('reports the open ports first, then port_opened and port_closed as a server starts and stops', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const base = `${baseUrl(runner.app)}/v1/sandboxes/${id}`
    const abort = new AbortController()
    const res = await fetch(`${base}/port-events`, { headers: runner.auth, signal: abort.signal })
    expect(res.headers.get('content-type')).toContain('application/x-ndjson')
    const events: PortEvent[] = []
    const reader = (async () => {
      let buffer = ''
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += Buffer.from(chunk).toString()
        const lines = buffer.split('\n')
        buffer = lines.pop() ?? ''
        for (const line of lines) events.push(PortEvent.parse(JSON.parse(line)))
      }
    })().catch(() => {})
    const { port } = await startSandboxServer(runner, id)
    await vi.waitFor(
      () => expect(events).toContainEqual({ type: 'port_opened', port, addresses: ['127.0.0.1'] }),
      {
        timeout: 20_000,
      },
    )
    const procs = (await (await fetch(`${base}/processes`, { headers: runner.auth })).json()) as {
      processes: { id: string }[]
    }
    for (const p of procs.processes)
      await fetch(`${base}/processes/${p.id}/kill`, {
        method: 'POST',
        headers: { ...runner.auth, 'content-type': 'application/json' },
        body: JSON.stringify({ signal: 'SIGKILL' }),
      })
    await vi.waitFor(() => expect(events).toContainEqual({ type: 'port_closed', port, addresses: [] }), {
      timeout: 20_000,
    })
    expect(events.filter((e) => e.port === port).map((e) => e.type)).toEqual(['port_opened', 'port_closed'])
    abort.abort()
    await reader
  })
})
