// Hostile clients against the router. A recording server sits in the router's shard table as
// shard `rec`, so each test can show what reached a runner and what never did.
import { shardOfSandboxId } from '@conch/protocol'
import { Sandbox } from '@conch/sdk'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { codeOf, openShell, openSocket, rawRequest, upgradeThenStopReading } from './raw-http.ts'
import { type Recorded, type RecordingServer, startRecordingServer } from './recording-server.ts'
import { type Cluster, type Listening, shardList, startCluster } from './runner-cluster.ts'

let cluster: Cluster
let rec: RecordingServer
let router: Listening
const REC_ID = 'sb_recZabcdefgh12345678'

beforeAll(async () => {
  cluster = await startCluster(2)
  rec = await startRecordingServer()
  router = await cluster.extraRouter([
    '--shards',
    `${shardList(cluster.runners)},rec=${rec.url}`,
    '--headers-timeout-ms',
    '500',
    '--request-timeout-ms',
    '1000',
  ])
})
afterAll(async () => {
  await rec?.[Symbol.asyncDispose]()
  await cluster?.[Symbol.asyncDispose]()
})
beforeEach(() => {
  rec.seen.length = 0
})

/** What reached the recording shard, other than the router's own readiness polls. */
const forwarded = (): Recorded[] => rec.seen.filter((r) => r.url !== '/readyz')
const auth = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` })

describe('ids the router will not forward', () => {
  it('answers SANDBOX_NOT_FOUND for an id that names no shard of its table', async () => {
    for (const id of ['sb_nosuchZabcdefgh12345678', 'sb_abcdefgh12345678', 'sb_127X0X0X1Zabcdefgh123']) {
      const res = await rawRequest(router.url, 'GET', `/v1/sandboxes/${id}/sessions`, auth(cluster.apiKey))
      expect([res.status, codeOf(res)], id).toEqual([404, 'SANDBOX_NOT_FOUND'])
    }
    const ws = await openShell(router.url, 'sb_nosuchZabcdefgh12345678', cluster.apiKey)
    expect(ws.kind === 'refused' && ws.status).toBe(404)
  })

  it('refuses dot segments, encoded slashes and malformed ids before forwarding anything', async () => {
    const paths = [
      '/v1/sandboxes/../metrics',
      `/v1/sandboxes/${REC_ID}/../../metrics`,
      `/v1/sandboxes/${REC_ID}/%2e%2e/%2E%2E/metrics`,
      `/v1/sandboxes/${REC_ID}/files%2f..%2fx`,
      `/v1/sandboxes/${REC_ID}/..%5c..%5cx`,
      '/v1/sandboxes/sb_rec@127.0.0.1:1/x',
      '/v1/sandboxes/%E0%A4%A/x',
    ]
    for (const path of paths) {
      const res = await rawRequest(router.url, 'GET', path, auth(cluster.apiKey))
      expect([res.status, codeOf(res)], path).toEqual([400, 'BAD_REQUEST'])
    }
    // The same through a WebSocket upgrade, sent raw (a WebSocket client would resolve the dots).
    const upgrade = await rawRequest(router.url, 'GET', `/v1/sandboxes/${REC_ID}/../${REC_ID}/shell`, {
      ...auth(cluster.apiKey),
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
    })
    expect([upgrade.status, codeOf(upgrade)]).toEqual([400, 'BAD_REQUEST'])
    expect(forwarded()).toEqual([])
  })

  it('sends a request only to the table URL, whatever the Host or request target says', async () => {
    const res = await rawRequest(router.url, 'GET', `/v1/sandboxes/${REC_ID}/sessions?x=1`, {
      ...auth('conch_the_callers_own_key_0001'),
      host: 'attacker.example:9',
      connection: 'x-hop',
      'x-hop': 'not forwarded',
    })
    expect(res.status).toBe(200)
    expect(forwarded()).toHaveLength(1)
    expect(forwarded()[0]!.url).toBe(`/v1/sandboxes/${REC_ID}/sessions?x=1`)
    expect(forwarded()[0]!.headers.host).toBe(new URL(rec.url).host)
    // The credential is forwarded exactly as the client sent it; the router adds none.
    expect(forwarded()[0]!.headers.authorization).toBe('Bearer conch_the_callers_own_key_0001')
    expect(forwarded()[0]!.headers['x-hop']).toBeUndefined()
    const absolute = await rawRequest(
      router.url,
      'GET',
      `http://attacker.example/v1/sandboxes/${REC_ID}/x`,
      auth(cluster.apiKey),
    )
    expect(absolute.status).toBeGreaterThanOrEqual(400)
    expect(forwarded()).toHaveLength(1)
  })
})

describe('credentials through the router', () => {
  it('lets a sandbox token reach only its own sandbox, even with a forged id on another shard', async () => {
    const key = { url: router.url, apiKey: cluster.apiKey }
    const a = await Sandbox.create({ url: cluster.runners[0]!.current.url, apiKey: cluster.apiKey })
    const b = await Sandbox.create({ url: cluster.runners[1]!.current.url, apiKey: cluster.apiKey })
    const { token } = await (await Sandbox.connect(a.id, key)).createAccessToken()
    const own = await rawRequest(router.url, 'GET', `/v1/sandboxes/${a.id}`, auth(token))
    expect(own.status).toBe(200)
    // As a browser sends it, in a subprotocol: the runner's choice comes back, never the secret.
    const ownShell = await openShell(router.url, a.id, token, { viaSubprotocol: true })
    if (ownShell.kind !== 'open') throw new Error(`refused: ${ownShell.status} ${ownShell.body}`)
    expect(ownShell.ws.protocol).toBe('conch.v1')
    ownShell.ws.close()
    await ownShell.closed
    const forged = `sb_conchX1Z${a.id.slice(a.id.indexOf('Z') + 1)}`
    for (const id of [b.id, forged]) {
      const res = await rawRequest(router.url, 'GET', `/v1/sandboxes/${id}`, auth(token))
      expect([res.status, codeOf(res)], id).toEqual([401, 'UNAUTHORIZED'])
      const ws = await openShell(router.url, id, token, { viaSubprotocol: true })
      expect(ws.kind === 'refused' && ws.status, id).toBe(401)
    }
    const list = await rawRequest(router.url, 'GET', '/v1/sandboxes', auth(token))
    // conch-0 knows the token and refuses it a listing; that refusal is the more telling one.
    expect([list.status, codeOf(list)]).toEqual([403, 'FORBIDDEN'])
    const anonymous = await rawRequest(router.url, 'GET', `/v1/sandboxes/${a.id}`)
    expect([anonymous.status, codeOf(anonymous)]).toEqual([401, 'UNAUTHORIZED'])
    await a.destroy()
    await b.destroy()
  })
})

describe('oversized and slow clients', () => {
  it('refuses headers over the limit with FRAME_TOO_LARGE and keeps serving', async () => {
    const res = await rawRequest(router.url, 'GET', `/v1/sandboxes/${REC_ID}`, {
      'x-pad': 'a'.repeat(20_000),
    })
    expect([res.status, codeOf(res)]).toEqual([413, 'FRAME_TOO_LARGE'])
    expect((await rawRequest(router.url, 'GET', '/healthz')).status).toBe(200)
    expect(forwarded()).toEqual([])
  })

  it('refuses a body over the limit with FRAME_TOO_LARGE without forwarding it', async () => {
    // The declared length alone is enough to refuse; the client need not send 9 MiB first.
    const socket = await openSocket(router.url)
    socket.on('error', () => {})
    let received = ''
    socket.on('data', (d: Buffer) => {
      received += d.toString()
    })
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.write(
      `PUT /v1/sandboxes/${REC_ID}/files?path=big HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/octet-stream\r\ncontent-length: ${9 * 1024 * 1024}\r\n\r\naaaa`,
    )
    await closed
    expect(received).toMatch(/^HTTP\/1.1 413 /)
    expect(received).toContain('"code":"FRAME_TOO_LARGE"')
    expect(forwarded()).toEqual([])
  })

  it('closes a connection that drips its headers (slow loris), even behind an idle keep-alive one', async () => {
    // An idle keep-alive connection opened first: Node's own timeout scan stops at it.
    const idle = await openSocket(router.url)
    idle.on('error', () => {})
    const answered = new Promise<void>((resolve) => idle.once('data', () => resolve()))
    idle.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n')
    await answered
    const socket = await openSocket(router.url)
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.on('error', () => {})
    socket.write(`GET /v1/sandboxes/${REC_ID} HTTP/1.1\r\nhost: x\r\n`)
    let open = true
    void closed.then(() => {
      open = false
    })
    const drip = setInterval(() => {
      if (open) socket.write('x-drip: 1\r\n')
    }, 50)
    expect((await rawRequest(router.url, 'GET', '/healthz')).status).toBe(200)
    await closed
    clearInterval(drip)
    idle.destroy()
    expect(forwarded()).toEqual([])
  })

  it('closes a connection whose request body never ends, without forwarding it', async () => {
    const socket = await openSocket(router.url)
    socket.on('error', () => {})
    let received = ''
    socket.on('data', (d: Buffer) => {
      received += d.toString()
    })
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.write(
      `POST /v1/sandboxes/${REC_ID}/exec HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"co`,
    )
    await closed
    expect(received).toMatch(/^HTTP\/1.1 408 /)
    expect(forwarded()).toEqual([])
  })
})

describe('long answers to quick requests', () => {
  it('keeps a buffered run and a streamed GET going past the request deadline once the request arrived', async () => {
    // This router gives a request 1 s to arrive; both answers take longer than that.
    const sandbox = await Sandbox.create({ url: router.url, apiKey: cluster.apiKey })
    expect((await sandbox.exec('sleep 2; echo done')).stdout).toBe('done\n')
    const proc = await sandbox.startProcess('for i in 1 2 3 4; do echo tick$i; sleep 0.6; done')
    let out = ''
    let exitCode: number | null = null
    for await (const ev of proc.stream()) {
      if (ev.type === 'stdout') out += ev.data
      if (ev.type === 'exit') exitCode = ev.exitCode
    }
    expect([out, exitCode]).toEqual(['tick1\ntick2\ntick3\ntick4\n', 0])
    await sandbox.destroy()
  })
})

describe('a misconfigured shard table', () => {
  it('never places on a runner that answers under another shard name, and says why', async () => {
    const wrong = await cluster.extraRouter(['--shards', `conch-9=${cluster.runners[0]!.current.url}`])
    const ready = await rawRequest(wrong.url, 'GET', '/readyz')
    expect([ready.status, JSON.parse(ready.body).checks]).toEqual([503, { 'conch-9': false }])
    const create = await rawRequest(
      wrong.url,
      'POST',
      '/v1/sandboxes',
      {
        ...auth(cluster.apiKey),
        'content-type': 'application/json',
      },
      '{}',
    )
    expect([create.status, codeOf(create)]).toEqual([503, 'RUNNER_UNAVAILABLE'])
    expect(JSON.parse(create.body).error.message).toMatch(/reports shard "conch-0", not "conch-9"/)
  })
})

describe('router endpoints', () => {
  it('reports readiness per shard and serves metrics', async () => {
    const ready = JSON.parse((await rawRequest(router.url, 'GET', '/readyz')).body)
    expect(ready).toMatchObject({ ok: true, checks: { 'conch-0': true, 'conch-1': true, rec: false } })
    const metrics = await rawRequest(router.url, 'GET', '/metrics')
    expect(metrics.body).toMatch(/conch_router_shard_ready\{shard="conch-0"\} 1/)
    expect(metrics.body).toMatch(/conch_router_shard_ready\{shard="rec"\} 0/)
  })

  it('answers an unknown route and a WebSocket outside a sandbox path with NOT_FOUND', async () => {
    const res = await rawRequest(router.url, 'GET', '/v2/anything', auth(cluster.apiKey))
    expect([res.status, codeOf(res)]).toEqual([404, 'NOT_FOUND'])
    for (const path of ['/v2/anything', '/v1/sandboxes', '/metrics']) {
      const ws = await rawRequest(router.url, 'GET', path, {
        ...auth(cluster.apiKey),
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      })
      expect([ws.status, codeOf(ws)], path).toEqual([404, 'NOT_FOUND'])
    }
    expect(forwarded()).toEqual([])
  })
})

describe('attack: hold the router open at shutdown', () => {
  it('stops on SIGTERM with relayed shell sockets open, one from a client that stopped reading', async () => {
    // The HTTP server's close waits for every relayed socket; the router must end them itself.
    const own = await cluster.extraRouter([])
    const sandbox = await Sandbox.create({ url: own.url, apiKey: cluster.apiKey })
    const reading = await openShell(own.url, sandbox.id, cluster.apiKey)
    if (reading.kind !== 'open') throw new Error(`shell refused: ${reading.status} ${reading.body}`)
    const stalled = await upgradeThenStopReading(own.url, `/v1/sandboxes/${sandbox.id}/shell`, {
      'sec-websocket-protocol': 'conch.v1',
      ...auth(cluster.apiKey),
    })
    stalled.on('error', () => {})
    const stalledClosed = new Promise<void>((resolve) => stalled.once('close', () => resolve()))

    own.child.kill('SIGTERM')
    await own.exited
    expect(own.child.exitCode).toBe(0)
    expect(await reading.closed).toEqual({ code: 1001, reason: 'router shutting down' })
    // Reading again, the stalled client finds its connection ended by the router.
    stalled.resume()
    await stalledClosed
    const home = cluster.runners.find((r) => r.shard === shardOfSandboxId(sandbox.id))!
    await (await Sandbox.connect(sandbox.id, { url: home.current.url, apiKey: cluster.apiKey })).destroy()
  })
})
