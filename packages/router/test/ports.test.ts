// Sandbox ports through the router: the path-form relay (HTTP and WebSocket) and preview hosts,
// reaching a real server inside a sandbox on a real runner; then hostile Hosts, paths and
// credentials; then uploads, which stream through the relay but nowhere else. A recording server sits in the shard table as shard `rec`, so each attack shows
// what reached a runner and what never did.
import { Sandbox } from '@conch/sdk'
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import WebSocket from 'ws'
import { codeOf, type RawResponse, rawRequest } from './raw-http.ts'
import { type Recorded, type RecordingServer, startRecordingServer } from './recording-server.ts'
import { type Cluster, type Listening, shardList, startCluster } from './runner-cluster.ts'
import { SANDBOX_SERVER } from './sandbox-server.ts'
import { startUpload, upload } from './streamed-upload.ts'

const DOMAIN = 'preview.test'
const MiB = 1024 * 1024
const REC_ID = 'sb_recZabcdefgh12345678'
const UPGRADE = {
  connection: 'Upgrade',
  upgrade: 'websocket',
  'sec-websocket-version': '13',
  'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
}

let cluster: Cluster
let rec: RecordingServer
let router: Listening
/** A sandbox on conch-0 running SANDBOX_SERVER, and one on conch-1 running it too. */
let a: Sandbox
let b: Sandbox
let portA = 0
let portB = 0

const auth = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` })
/** What reached the recording shard, other than the router's own readiness polls. */
const forwarded = (): Recorded[] => rec.seen.filter((r) => r.url !== '/readyz')
const previewHost = (port: number, id: string): string => `${port}-${id.toLowerCase()}.${DOMAIN}`

/** Starts SANDBOX_SERVER inside `sandbox` (through the router) and resolves with its port. */
async function startServer(sandbox: Sandbox): Promise<number> {
  const base = `/v1/sandboxes/${sandbox.id}`
  const headers = { ...auth(cluster.apiKey), 'content-type': 'application/json' }
  const put = await rawRequest(
    router.url,
    'PUT',
    `${base}/files?path=/workspace/srv.js`,
    headers,
    SANDBOX_SERVER,
  )
  expect(put.status, put.body).toBe(200)
  const start = await rawRequest(
    router.url,
    'POST',
    `${base}/processes`,
    headers,
    JSON.stringify({ command: 'exec node srv.js srv' }),
  )
  expect(start.status, start.body).toBe(200)
  return vi.waitFor(
    async () => {
      const res = await rawRequest(router.url, 'GET', `${base}/files?path=/workspace/srv.port`, headers)
      if (res.status !== 200) throw new Error('srv.port not written yet')
      return Number(res.body)
    },
    { timeout: 30_000, interval: 100 },
  )
}

/** Opens a WebSocket through the router; resolves open, or with the refusal. */
function openSocket(
  path: string,
  headers: Record<string, string>,
): Promise<{ ws: WebSocket } | { status: number; body: string }> {
  const ws = new WebSocket(`${router.url.replace(/^http/, 'ws')}${path}`, { headers })
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws }))
    ws.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (c: Buffer) => {
        body += c.toString()
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    ws.once('error', reject)
  })
}

/** Sends `data` and resolves with the next message and whether it was binary. */
function echo(ws: WebSocket, data: string | Buffer): Promise<[string, boolean]> {
  return new Promise((resolve) => {
    ws.once('message', (m: Buffer, isBinary: boolean) => resolve([m.toString(), isBinary]))
    ws.send(data)
  })
}

/** The router's gauge of request bodies being streamed to runners now. */
async function streamedUploads(): Promise<number> {
  const metrics = await rawRequest(router.url, 'GET', '/metrics')
  return Number(/^conch_router_streamed_uploads (\d+)$/m.exec(metrics.body)?.[1] ?? Number.NaN)
}

const refusal = (r: RawResponse | { status: number; body: string }): [number, string | null] => [
  r.status,
  codeOf({ status: r.status, headers: {}, body: r.body }),
]

beforeAll(async () => {
  cluster = await startCluster(2, [], ['--preview-domain', DOMAIN])
  rec = await startRecordingServer()
  router = await cluster.extraRouter([
    '--shards',
    `${shardList(cluster.runners)},rec=${rec.url}`,
    '--preview-domain',
    DOMAIN,
    '--max-body-bytes',
    String(MiB),
  ])
  a = await Sandbox.create({ url: cluster.runners[0]!.current.url, apiKey: cluster.apiKey })
  b = await Sandbox.create({ url: cluster.runners[1]!.current.url, apiKey: cluster.apiKey })
  ;[portA, portB] = await Promise.all([startServer(a), startServer(b)])
})
afterAll(async () => {
  await a?.destroy().catch(() => {})
  await b?.destroy().catch(() => {})
  await rec?.[Symbol.asyncDispose]()
  await cluster?.[Symbol.asyncDispose]()
})
beforeEach(() => {
  rec.seen.length = 0
})

describe('a sandbox port through the router', () => {
  it('relays HTTP on the path form to the shard the id names', async () => {
    for (const [sandbox, port] of [
      [a, portA],
      [b, portB],
    ] as const) {
      const res = await rawRequest(
        router.url,
        'POST',
        `/v1/sandboxes/${sandbox.id}/ports/${port}/echo?x=1`,
        auth(cluster.apiKey),
        'hello',
      )
      expect(res.status, res.body).toBe(200)
      expect(JSON.parse(res.body)).toMatchObject({ method: 'POST', url: '/echo?x=1', body: 5 })
    }
  })

  it('relays a WebSocket echo on the path form, text and binary, with a sandbox token', async () => {
    const { token } = await a.createAccessToken()
    const opened = await openSocket(`/v1/sandboxes/${a.id}/ports/${portA}/ws`, auth(token))
    if (!('ws' in opened)) throw new Error(`refused: ${opened.status} ${opened.body}`)
    expect(await echo(opened.ws, 'hello')).toEqual(['hello', false])
    expect(await echo(opened.ws, Buffer.from('bytes'))).toEqual(['bytes', true])
    opened.ws.close()
  })

  it('serves a preview host, HTTP and WebSocket, through the shard its id names', async () => {
    const res = await rawRequest(router.url, 'GET', '/echo?y=2', {
      ...auth(cluster.apiKey),
      host: previewHost(portB, b.id),
    })
    expect(res.status, res.body).toBe(200)
    // Every path on a preview host is the app's: the runner saw the path as the client sent it.
    expect(JSON.parse(res.body)).toMatchObject({ method: 'GET', url: '/echo?y=2' })
    // The router's own routes are not served on a preview host either.
    const health = await rawRequest(router.url, 'GET', '/healthz', {
      ...auth(cluster.apiKey),
      host: previewHost(portA, a.id),
    })
    expect(JSON.parse(health.body)).toMatchObject({ url: '/healthz' })
    const opened = await openSocket('/socket', { ...auth(cluster.apiKey), host: previewHost(portA, a.id) })
    if (!('ws' in opened)) throw new Error(`refused: ${opened.status} ${opened.body}`)
    expect(await echo(opened.ws, 'over preview')).toEqual(['over preview', false])
    opened.ws.close()
  })

  it('lets a browser in with the port token of exposePort, traded for a cookie, on both forms', async () => {
    const viaRouter = await Sandbox.connect(b.id, { url: router.url, apiKey: cluster.apiKey })
    const exposed = await viaRouter.exposePort(portB)
    const preview = new URL(exposed.previewUrl!)
    expect(preview.host).toBe(previewHost(portB, b.id))
    const token = preview.searchParams.get('conch_port_token')!
    for (const [host, path] of [
      [preview.host, '/page'],
      [undefined, `/v1/sandboxes/${b.id}/ports/${portB}/page`],
    ] as const) {
      const hostHeader: Record<string, string> = host ? { host } : {}
      const visit = await rawRequest(router.url, 'GET', `${path}?conch_port_token=${token}`, hostHeader)
      expect(visit.status, visit.body).toBeGreaterThanOrEqual(300)
      expect(visit.status).toBeLessThan(400)
      const cookie = String(visit.headers['set-cookie']).split(';')[0]!
      const page = await rawRequest(router.url, 'GET', path, { ...hostHeader, cookie })
      expect([page.status, JSON.parse(page.body).url], path).toEqual([200, '/page'])
      expect((await rawRequest(router.url, 'GET', path, hostHeader)).status, path).toBe(401)
    }
    await viaRouter.unexposePort(portB)
  })

  it('passes the Host, path, query and cookie of a preview host unchanged, to the table URL only', async () => {
    const host = previewHost(80, REC_ID)
    const res = await rawRequest(router.url, 'GET', '/app/../x?conch_port_token=t1', {
      host,
      cookie: 'conch_port_token=c1',
    })
    expect(res.status).toBe(200)
    const upgrade = await rawRequest(router.url, 'GET', '/ws?q=1', { ...UPGRADE, host, cookie: 'k=v' })
    expect(upgrade.status).toBe(403)
    expect(forwarded().map((r) => [r.url, r.headers.host, r.headers.cookie, r.upgrade])).toEqual([
      ['/app/../x?conch_port_token=t1', host, 'conch_port_token=c1', false],
      ['/ws?q=1', host, 'k=v', true],
    ])
  })

  it('passes a port socket’s query and cookie credentials unchanged, with the shard’s own Host', async () => {
    const path = `/v1/sandboxes/${REC_ID}/ports/80/ws?conch_port_token=t2`
    const res = await rawRequest(router.url, 'GET', path, {
      ...UPGRADE,
      host: 'attacker.example',
      cookie: 'conch_port_token=c2',
    })
    expect(res.status).toBe(403)
    expect(forwarded().map((r) => [r.url, r.headers.host, r.headers.cookie, r.upgrade])).toEqual([
      [path, new URL(rec.url).host, 'conch_port_token=c2', true],
    ])
  })
})

describe('a terminal socket through the router', () => {
  it('attaches to a terminal on the shard the id names and echoes typed input', async () => {
    const viaRouter = await Sandbox.connect(b.id, { url: router.url, apiKey: cluster.apiKey })
    const term = await viaRouter.terminal({ command: ['cat'] })
    let out = ''
    term.onData((bytes) => {
      out += Buffer.from(bytes).toString()
    })
    term.write('through the router\n')
    await vi.waitFor(() => expect(out).toContain('through the router'), { timeout: 20_000 })
    await term.close()
  })
})

describe('hostile preview hosts and port paths', () => {
  it('refuses a preview host of another shard’s sandbox with the first sandbox’s token', async () => {
    const { token } = await a.createAccessToken()
    const forged = `sb_conchX1Z${a.id.slice(a.id.indexOf('Z') + 1)}`
    for (const id of [b.id, forged]) {
      const res = await rawRequest(router.url, 'GET', '/', { ...auth(token), host: previewHost(portB, id) })
      expect(refusal(res), id).toEqual([401, 'UNAUTHORIZED'])
      const ws = await openSocket('/', { ...auth(token), host: previewHost(portB, id) })
      expect('status' in ws && ws.status, id).toBe(401)
      const path = await rawRequest(router.url, 'GET', `/v1/sandboxes/${id}/ports/${portB}/`, auth(token))
      expect(refusal(path), id).toEqual([401, 'UNAUTHORIZED'])
    }
  })

  it('refuses a preview host whose id names no shard of the table, before forwarding', async () => {
    for (const id of ['sb_nosuchzabcdefgh12345678', 'sb_abcdefgh12345678', 'sb_reczabcdefg']) {
      const host = previewHost(80, id)
      const res = await rawRequest(router.url, 'GET', '/', { ...auth(cluster.apiKey), host })
      expect(refusal(res), host).toEqual([404, 'SANDBOX_NOT_FOUND'])
      const up = await rawRequest(router.url, 'GET', '/', { ...auth(cluster.apiKey), ...UPGRADE, host })
      expect(refusal(up), host).toEqual([404, 'SANDBOX_NOT_FOUND'])
    }
    expect(forwarded()).toEqual([])
  })

  it('refuses a host under the domain that is not a preview host, before forwarding', async () => {
    const rec80 = previewHost(80, REC_ID)
    for (const host of [
      `x.${rec80}`,
      `99999-${REC_ID.toLowerCase()}.${DOMAIN}`,
      `0-${REC_ID.toLowerCase()}.${DOMAIN}`,
      `80_${REC_ID.toLowerCase()}.${DOMAIN}`,
      `80-${REC_ID.toLowerCase()}%2e.${DOMAIN}`,
      DOMAIN.replace(/^/, 'x.'),
    ]) {
      const res = await rawRequest(router.url, 'GET', '/', { host })
      expect(refusal(res), host).toEqual([400, 'BAD_REQUEST'])
      const up = await rawRequest(router.url, 'GET', '/', { ...UPGRADE, host })
      expect(refusal(up), host).toEqual([400, 'BAD_REQUEST'])
    }
    expect(forwarded()).toEqual([])
  })

  it('treats a preview-looking host off the domain as API traffic, which forwards nothing', async () => {
    const id = REC_ID.toLowerCase()
    for (const host of [`80-${id}.${DOMAIN}.evil.example`, `80-${id}.evil${DOMAIN}`, `80-${id}`]) {
      const res = await rawRequest(router.url, 'GET', '/', { host })
      expect(refusal(res), host).toEqual([404, 'NOT_FOUND'])
      const up = await rawRequest(router.url, 'GET', '/', { ...UPGRADE, host })
      expect(refusal(up), host).toEqual([404, 'NOT_FOUND'])
    }
    // The internal route preview hosts are routed onto is not reachable by path.
    const internal = await rawRequest(router.url, 'GET', '/.conch-preview', { host: 'router.example' })
    expect(refusal(internal)).toEqual([404, 'NOT_FOUND'])
    expect(forwarded()).toEqual([])
  })

  it('refuses port upgrades with dot segments or encoded separators before forwarding', async () => {
    for (const path of [
      `/v1/sandboxes/${REC_ID}/ports/80/../../${REC_ID}/shell`,
      `/v1/sandboxes/${REC_ID}/ports/80/%2e%2e/%2E%2E/shell`,
      `/v1/sandboxes/${REC_ID}/ports/80%2f..%2f..%2fshell`,
      `/v1/sandboxes/${REC_ID}/ports/..%5c..%5cx`,
      `/v1/sandboxes/sb_rec@127.0.0.1:1/ports/80/`,
    ]) {
      const up = await rawRequest(router.url, 'GET', path, { ...auth(cluster.apiKey), ...UPGRADE })
      expect(refusal(up), path).toEqual([400, 'BAD_REQUEST'])
    }
    expect(forwarded()).toEqual([])
  })

  it('passes the runner’s refusal of a port upgrade without credentials, and opens nothing', async () => {
    const path = `/v1/sandboxes/${a.id}/ports/${portA}/ws`
    const bare = await openSocket(path, {})
    expect('status' in bare && refusal(bare)).toEqual([401, 'UNAUTHORIZED'])
    const preview = await openSocket('/ws', { host: previewHost(portA, a.id) })
    expect('status' in preview && refusal(preview)).toEqual([401, 'UNAUTHORIZED'])
    // Every socket the earlier tests opened has closed, and the refused ones never counted.
    await vi.waitFor(async () => {
      const metrics = await rawRequest(router.url, 'GET', '/metrics')
      expect(metrics.body).toMatch(/conch_router_shell_sockets 0/)
    })
  })
})

describe('uploads through the router', () => {
  it('streams a 50 MB POST whole to the sandbox server, path form with a length, preview host chunked', async () => {
    for (const [path, headers, chunked] of [
      [`/v1/sandboxes/${a.id}/ports/${portA}/upload`, auth(cluster.apiKey), false],
      ['/upload', { ...auth(cluster.apiKey), host: previewHost(portB, b.id) }, true],
    ] as const) {
      const sent = await upload(router.url, path, headers, 50, { chunked })
      expect(sent.response.status, sent.response.body).toBe(200)
      expect(JSON.parse(sent.response.body), path).toMatchObject({
        method: 'POST',
        url: '/upload',
        body: 50 * MiB,
        sha256: sent.sha256,
      })
    }
    await vi.waitFor(async () => expect(await streamedUploads()).toBe(0))
  })

  it('keeps the API body limit on every route that is not a port relay, forwarding nothing', async () => {
    const big = Buffer.alloc(2 * MiB, 'x')
    const id = REC_ID
    const offDomain = { host: `80-${id.toLowerCase()}.${DOMAIN}.evil.example` }
    const cases: [string, Record<string, string>, [number, string]][] = [
      ['/v1/sandboxes', {}, [413, 'FRAME_TOO_LARGE']],
      [`/v1/sandboxes/${id}/files?path=/workspace/big`, {}, [413, 'FRAME_TOO_LARGE']],
      [`/v1/sandboxes/${id}/ports`, {}, [413, 'FRAME_TOO_LARGE']],
      [`/v1/sandboxes/${id}/exposed-ports/80`, {}, [413, 'FRAME_TOO_LARGE']],
      [`/v1/sandboxes/${id}/portsx/80/`, {}, [413, 'FRAME_TOO_LARGE']],
      [`/v1/sandboxes/${id}/PORTS/80/`, {}, [413, 'FRAME_TOO_LARGE']],
      [`/v1/sandboxes/${id}/ports%2f80/x`, {}, [413, 'FRAME_TOO_LARGE']],
      [`/v1/sandboxes/${id}/files`, offDomain, [413, 'FRAME_TOO_LARGE']],
      [`/v1/sandboxes/${id}/ports/80/../../files`, {}, [400, 'BAD_REQUEST']],
      [`/v1/sandboxes/${id}/ports/80/%2e%2e/%2E%2E/files`, {}, [400, 'BAD_REQUEST']],
      [`/v1/sandboxes/${id}/ports/files/`, {}, [400, 'BAD_REQUEST']],
      [`/v1/sandboxes/${id}/ports/0/`, {}, [400, 'BAD_REQUEST']],
      [`/v1/sandboxes/${id}/ports/65536`, {}, [400, 'BAD_REQUEST']],
      ['/.conch-preview', { host: 'router.example' }, [404, 'NOT_FOUND']],
    ]
    for (const [path, headers, expected] of cases) {
      const res = await rawRequest(router.url, 'POST', path, { ...auth(cluster.apiKey), ...headers }, big)
      expect(refusal(res), path).toEqual(expected)
    }
    expect(forwarded()).toEqual([])
    // The real API route on a real runner is limited the same way.
    const put = await rawRequest(
      router.url,
      'PUT',
      `/v1/sandboxes/${a.id}/files?path=/workspace/big`,
      auth(cluster.apiKey),
      big,
    )
    expect(refusal(put)).toEqual([413, 'FRAME_TOO_LARGE'])
  })

  it('ends the runner’s request when the client goes away mid-upload', async () => {
    const socket = await startUpload(
      router.url,
      `/v1/sandboxes/${a.id}/ports/${portA}/upload`,
      auth(cluster.apiKey),
      50 * MiB,
      2 * MiB,
    )
    await vi.waitFor(async () => expect(await streamedUploads()).toBe(1), { timeout: 20_000 })
    socket.destroy()
    await vi.waitFor(async () => expect(await streamedUploads()).toBe(0), { timeout: 20_000 })
  })

  it('answers a typed error, not a hang, when the runner goes away mid-upload', async () => {
    const path = `/v1/sandboxes/${REC_ID}/ports/80/hang-up`
    const sent = await upload(router.url, path, {}, 4)
    expect(refusal(sent.response)).toEqual([503, 'RUNNER_UNAVAILABLE'])
    expect(forwarded().map((r) => [r.method, r.url])).toEqual([['POST', path]])
    // A keep-alive client that sends its whole body before reading gets the answer too, and
    // its connection serves the next request: the rest of its body was read and dropped.
    const socket = await startUpload(router.url, path, {}, 4 * MiB, 4 * MiB)
    socket.write('GET /healthz HTTP/1.1\r\nhost: router.example\r\n\r\n')
    let text = ''
    await new Promise<void>((resolve, reject) => {
      socket.on('data', (c: Buffer) => {
        text += c.toString('latin1')
        if (/"ok":true/.test(text)) resolve()
      })
      socket.once('close', () => reject(new Error(`closed after: ${text}`)))
    })
    socket.destroy()
    expect(text.match(/HTTP\/1\.1 \d{3}/g), text.slice(0, 2000)).toEqual(['HTTP/1.1 503', 'HTTP/1.1 200'])
    expect(text).toContain('RUNNER_UNAVAILABLE')
    await vi.waitFor(async () => expect(await streamedUploads()).toBe(0))
  })
})
