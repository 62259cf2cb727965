// Shell WebSocket paths against the peer agent (real Unix socket, real frames): framing,
// encodings, error frames, several clients, reattach and OUTPUT_LOST.
import { encodeOutputFrame } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { PeerDriver } from './peer-agent.ts'
import { baseUrl, startRunner } from './runner-fixture.ts'
import { ShellClient } from './shell-client.ts'

async function setup(now?: () => number) {
  await using owned = new AsyncDisposableStack()
  const driver = owned.use(new PeerDriver())
  const runner = owned.use(await startRunner({ driver, listen: true, ...(now ? { now } : {}) }))
  const res = await runner.app.inject({
    method: 'POST',
    url: '/v1/sandboxes',
    headers: runner.auth,
    payload: {},
  })
  const id = (res.json() as { id: string }).id
  const ws = `${baseUrl(runner.app).replace('http', 'ws')}/v1/sandboxes/${id}/shell`
  // From here the caller's `await using` owns the runner, then the driver.
  const resources = owned.move()
  return { runner, driver, id, ws, [Symbol.asyncDispose]: () => resources.disposeAsync() }
}

describe('shell socket (peer agent)', () => {
  it('sends hello, shell_ready and scrollback_end, then runs a command', async () => {
    await using t = await setup()
    await using c = await ShellClient.open(t.ws, t.runner.apiKey)
    expect(await c.nextOf('hello')).toMatchObject({ protocolVersion: 1 })
    const ready = await c.nextOf('shell_ready')
    expect(ready).toMatchObject({ encoding: 'utf8', running: null })
    await c.nextOf('scrollback_end')
    expect(await c.run('r1', 'printf "h\\xc3\\xa9"; echo err >&2; exit 3')).toEqual({
      stdout: 'hé',
      stderr: 'err\n',
      code: 3,
    })
  })

  it('answers malformed JSON, unknown frame types and oversized frames with error frames and stays open', async () => {
    await using driver = new PeerDriver()
    await using runner = await startRunner({ driver, listen: true, limits: { maxClientFrameBytes: 1000 } })
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    const id = (res.json() as { id: string }).id
    await using c = await ShellClient.open(
      `${baseUrl(runner.app).replace('http', 'ws')}/v1/sandboxes/${id}/shell`,
      runner.apiKey,
      { header: true },
    )
    await c.nextOf('scrollback_end')
    c.send('{nope')
    expect(await c.nextOf('error')).toMatchObject({ code: 'INVALID_FRAME', id: null })
    c.send({ type: 'launch_missiles' })
    expect(await c.nextOf('error')).toMatchObject({ code: 'UNKNOWN_FRAME_TYPE' })
    c.send({ type: 'shell_run', id: 'big', command: 'x'.repeat(2000) })
    expect(await c.nextOf('error')).toMatchObject({ code: 'FRAME_TOO_LARGE' })
    c.send({ type: 'ping', t: 5 })
    expect(await c.nextOf('pong')).toMatchObject({ t: 5 })
    expect(await c.run('ok', 'echo still')).toMatchObject({ stdout: 'still\n', code: 0 })
  })

  it('sends output as binary frames to a client that lists binary_output, losslessly and with offsets', async () => {
    await using t = await setup()
    await using c = await ShellClient.open(t.ws, t.runner.apiKey)
    c.send({ type: 'hello', protocolVersion: 1, capabilities: ['binary_output'] })
    const ready = await c.nextOf('shell_ready')
    await c.nextOf('scrollback_end')
    c.send({ type: 'shell_run', id: 'b', command: "printf '\\x00\\xff\\xfe'; printf 'e\\xe2' >&2" })
    const exit = await c.nextOf('shell_exit', 'b')
    const out = c.frames.filter((f) => f.type === 'shell_out' && f.id === 'b')
    const err = c.frames.filter((f) => f.type === 'shell_err' && f.id === 'b')
    expect(out.every((f) => f.binary === true) && err.every((f) => f.binary === true)).toBe(true)
    expect(Buffer.concat(out.map((f) => f.bytes as Buffer))).toEqual(Buffer.from([0, 0xff, 0xfe]))
    expect(Buffer.concat(err.map((f) => f.bytes as Buffer))).toEqual(Buffer.from([0x65, 0xe2]))
    expect(Number(exit.offset) - Number(ready.offset)).toBe(5)
    expect(c.frames.some((f) => String(f.type) === 'bad_binary')).toBe(false)
  })

  it('answers hostile binary frames (truncated header, unknown kind, id length past the end, output kind, too large) with error frames and stays open', async () => {
    await using driver = new PeerDriver()
    await using runner = await startRunner({ driver, listen: true, limits: { maxClientFrameBytes: 1000 } })
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    const id = (res.json() as { id: string }).id
    await using c = await ShellClient.open(
      `${baseUrl(runner.app).replace('http', 'ws')}/v1/sandboxes/${id}/shell`,
      runner.apiKey,
    )
    await c.nextOf('scrollback_end')
    const output = encodeOutputFrame('stdout', 'r1', 0, new Uint8Array([1, 2]))
    c.ws.send(output.subarray(0, 5))
    expect(await c.nextOf('error')).toMatchObject({
      code: 'INVALID_FRAME',
      message: expect.stringMatching(/header/),
    })
    const kind = output.slice()
    kind[0] = 200
    c.ws.send(kind)
    expect(await c.nextOf('error')).toMatchObject({ code: 'UNKNOWN_FRAME_TYPE' })
    const length = output.slice()
    new DataView(length.buffer).setUint16(1, 60_000)
    c.ws.send(length)
    expect(await c.nextOf('error')).toMatchObject({
      code: 'INVALID_FRAME',
      message: expect.stringMatching(/id length/),
    })
    c.ws.send(output)
    expect(await c.nextOf('error')).toMatchObject({
      code: 'INVALID_FRAME',
      message: expect.stringMatching(/runner to the client/),
    })
    c.ws.send(new Uint8Array(2000))
    expect(await c.nextOf('error')).toMatchObject({ code: 'FRAME_TOO_LARGE' })
    expect(await c.run('ok', 'echo still')).toMatchObject({ stdout: 'still\n', code: 0 })
  })

  it('delivers base64 output losslessly with ?encoding=base64', async () => {
    await using t = await setup()
    await using c = await ShellClient.open(`${t.ws}?encoding=base64`, t.runner.apiKey)
    await c.nextOf('scrollback_end')
    const out = await c.run('b', "printf '\\x00\\xff\\xfe'")
    expect(Buffer.from(out.stdout, 'base64')).toEqual(Buffer.from([0, 0xff, 0xfe]))
  })

  it('replays from an offset to a second client attached by sessionId, then shows it live runs', async () => {
    await using t = await setup()
    await using a = await ShellClient.open(t.ws, t.runner.apiKey)
    const ready = await a.nextOf('shell_ready')
    await a.run('r1', 'echo one')
    await a.run('r2', 'echo two')
    await using b = await ShellClient.open(`${t.ws}?sessionId=${ready.sessionId}&offset=4`, t.runner.apiKey)
    const readyB = await b.nextOf('shell_ready')
    expect(readyB).toMatchObject({ sessionId: ready.sessionId, offset: 4 })
    const replayed = await b.nextOf('shell_out')
    expect(replayed).toMatchObject({ id: 'r2', data: 'two\n', offset: 4 })
    await b.nextOf('scrollback_end')
    a.send({ type: 'shell_run', id: 'r3', command: 'echo three' })
    expect(await b.nextOf('shell_out', 'r3')).toMatchObject({ data: 'three\n' })
    await a.nextOf('shell_exit', 'r3')
  })

  it('answers a resume from an evicted offset with OUTPUT_LOST and the earliest offset', async () => {
    await using t = await setup()
    await using a = await ShellClient.open(t.ws, t.runner.apiKey)
    const ready = await a.nextOf('shell_ready')
    await a.run('r1', 'echo one')
    t.driver.peers.get(t.id)!.sessions.get(String(ready.sessionId))!.log.shift()
    await using b = await ShellClient.open(`${t.ws}?sessionId=${ready.sessionId}&offset=0`, t.runner.apiKey)
    expect(await b.nextOf('error')).toMatchObject({ code: 'OUTPUT_LOST', details: { earliestOffset: 4 } })
    expect((await b.closed).code).toBe(4410)
  })

  it('refuses a shell socket without credentials, with a token of another sandbox, and for an unknown sandbox', async () => {
    await using t = await setup()
    await expect(ShellClient.open(t.ws, 'conch_wrong')).rejects.toThrow('HTTP 401')
    const other = await t.runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: t.runner.auth,
      payload: {},
    })
    const otherId = (other.json() as { id: string }).id
    const minted = await t.runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${otherId}/tokens`,
      headers: t.runner.auth,
      payload: {},
    })
    const token = (minted.json() as { token: string }).token
    await expect(ShellClient.open(t.ws, token)).rejects.toThrow('HTTP 403')
    await using own = await ShellClient.open(t.ws.replace(t.id, otherId), token)
    await own.nextOf('shell_ready')
    await expect(ShellClient.open(t.ws.replace(t.id, 'sb_nothinghere'), t.runner.apiKey)).rejects.toThrow(
      'HTTP 404',
    )
  })

  it('refuses a shell socket with an expired sandbox token', async () => {
    let clock = 1_000_000
    await using t = await setup(() => clock)
    const minted = await t.runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${t.id}/tokens`,
      headers: t.runner.auth,
      payload: { ttlMs: 60_000 },
    })
    const token = (minted.json() as { token: string }).token
    await using ok = await ShellClient.open(t.ws, token)
    await ok.nextOf('shell_ready')
    clock += 60_000
    await expect(ShellClient.open(t.ws, token)).rejects.toThrow('HTTP 401')
  })

  it('destroys a sandbox once it has been idle for its idle timeout', async () => {
    let clock = 1_000_000
    await using t = await setup(() => clock)
    const res = await t.runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: t.runner.auth,
      payload: { idleTimeoutMs: 5_000 },
    })
    const idle = (res.json() as { id: string }).id
    clock += 4_000
    expect(t.runner.app.conch.manager.list().map((s) => s.id)).toContain(idle)
    clock += 2_000
    await vi.waitFor(() => expect(t.runner.app.conch.manager.list().map((s) => s.id)).not.toContain(idle), {
      timeout: 3_000,
    })
    expect(t.runner.app.conch.manager.list().map((s) => s.id)).toContain(t.id)
  })

  it("gives a sandbox created without an idle timeout the runner's default, and none to one created with null", async () => {
    let clock = 1_000_000
    await using driver = new PeerDriver()
    await using runner = await startRunner({
      driver,
      listen: true,
      now: () => clock,
      limits: { defaultIdleTimeoutMs: 10_000 },
    })
    const create = async (payload: object) => {
      const res = await runner.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        headers: runner.auth,
        payload,
      })
      expect(res.statusCode, res.body).toBe(200)
      return res.json() as { id: string; idleTimeoutMs: number | null }
    }
    const defaulted = await create({})
    const forever = await create({ idleTimeoutMs: null })
    expect(defaulted.idleTimeoutMs).toBe(10_000)
    expect(forever.idleTimeoutMs).toBeNull()
    clock += 11_000
    const ids = () => runner.app.conch.manager.list().map((s) => s.id)
    await vi.waitFor(() => expect(ids()).not.toContain(defaulted.id), { timeout: 3_000 })
    expect(ids()).toContain(forever.id)
  })

  it('turns the default idle timeout off with 0', async () => {
    await using driver = new PeerDriver()
    await using runner = await startRunner({ driver, listen: true, limits: { defaultIdleTimeoutMs: 0 } })
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    expect((res.json() as { idleTimeoutMs: number | null }).idleTimeoutMs).toBeNull()
  })

  it('counts runs, latency and errors in /metrics', async () => {
    await using t = await setup()
    await using c = await ShellClient.open(t.ws, t.runner.apiKey)
    await c.nextOf('scrollback_end')
    await c.run('m1', 'echo metered')
    c.send('{bad')
    await c.nextOf('error')
    const metrics = await t.runner.app.inject({ method: 'GET', url: '/metrics', headers: t.runner.auth })
    expect(metrics.body).toMatch(/conch_runs_total\{via="shell",outcome="exit"\} 1/)
    expect(metrics.body).toMatch(/conch_run_duration_seconds_count\{via="shell"\} 1/)
    expect(metrics.body).toMatch(/conch_errors_total\{code="INVALID_FRAME"\} 1/)
    expect(metrics.body).toMatch(/conch_bytes_streamed_total [1-9]/)
    expect(metrics.body).toMatch(/conch_sandboxes\{status="running"\} 1/)
  })

  it('drops a client that stops answering heartbeats and keeps its shell', async () => {
    await using driver = new PeerDriver()
    await using runner = await startRunner({ driver, listen: true, limits: { heartbeatIntervalMs: 50 } })
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    const id = (res.json() as { id: string }).id
    const url = `${baseUrl(runner.app).replace('http', 'ws')}/v1/sandboxes/${id}/shell`
    const silent = await ShellClient.open(url, runner.apiKey, { autoPong: false })
    const ready = await silent.nextOf('shell_ready')
    expect((await silent.closed).code).toBe(1006)
    await using again = await ShellClient.open(`${url}?sessionId=${ready.sessionId}`, runner.apiKey)
    expect(await again.run('x', 'echo back')).toMatchObject({ stdout: 'back\n' })
  })
})
