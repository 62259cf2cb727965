// Attacks through the shell WebSocket and the session routes, against real bash: a second
// client reusing a run id, an expired token, bad and huge frames, too many sockets on one
// session, and listing sessions at the session limit. Each must fail with a typed answer, and
// the victim (the other client, the socket, the runner's log) must be unharmed.
import { Writable } from 'node:stream'
import { ErrorBody, SessionList } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { generateToken, hashSecret } from '../../src/credentials.ts'
import { createSandbox, shellUrl, startRunner, type TestRunner } from '../runner-fixture.ts'
import { ShellClient } from '../shell-client.ts'

async function openShell(runner: TestRunner, id: string, query = '', secret = runner.apiKey) {
  const client = await ShellClient.open(shellUrl(runner, id, query), secret)
  const ready = await client.nextOf('shell_ready')
  await client.nextOf('scrollback_end')
  return { client, sessionId: String(ready.sessionId) }
}

async function queuedRuns(runner: TestRunner, id: string, sessionId: string): Promise<number> {
  const res = await runner.app.inject({
    method: 'GET',
    url: `/v1/sandboxes/${id}/sessions/${sessionId}`,
    headers: runner.auth,
  })
  return (res.json() as { queued: number }).queued
}

describe('attack: reuse another client run id on the same session', () => {
  it('runs both commands and gives each client its own output and exit code', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const a = await openShell(runner, id)
    await using first = a.client
    await using second = (await openShell(runner, id, `?sessionId=${a.sessionId}`)).client

    // The first run waits for a file, so the second one is queued behind it with the same id.
    const fromA = first.run('r1', 'while [ ! -e go ]; do sleep 0.02; done; echo from-a; (exit 3)')
    await first.nextOf('shell_start', 'r1')
    const fromB = second.run('r1', 'echo from-b')
    await vi.waitFor(async () => expect(await queuedRuns(runner, id, a.sessionId)).toBe(1))
    await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers: runner.auth,
      payload: { command: 'touch go' },
    })

    expect(await fromA).toEqual({ stdout: 'from-a\n', stderr: '', code: 3 })
    expect(await fromB).toEqual({ stdout: 'from-b\n', stderr: '', code: 0 })
    // Neither client saw the other's run under its own id.
    expect(first.frames.filter((f) => f.id === 'r1' && f.type === 'shell_exit')).toHaveLength(1)
    expect(second.frames.filter((f) => f.id === 'r1' && f.type === 'shell_exit')).toHaveLength(1)
  })

  it("keeps a client's own ids apart when one of them is the id the runner gave its other run", async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const a = await openShell(runner, id)
    await using first = a.client
    await using second = (await openShell(runner, id, `?sessionId=${a.sessionId}`)).client

    const fromA = first.run('r1', 'while [ ! -e go ]; do sleep 0.02; done; echo from-a')
    await first.nextOf('shell_start', 'r1')
    // r1 is taken in the session, so the runner gives B's r1 an id of its own (`~r1` in a
    // fresh runner); B then uses that very id for a second run, which must get another one.
    second.send({ type: 'shell_run', id: 'r1', command: 'echo b-one; (exit 4)' })
    second.send({ type: 'shell_run', id: '~r1', command: 'echo b-two; (exit 5)' })
    await vi.waitFor(async () => expect(await queuedRuns(runner, id, a.sessionId)).toBe(2))
    // Both are in flight under B's ids.
    second.send({ type: 'shell_run', id: 'r1', command: 'echo again' })
    second.send({ type: 'shell_run', id: '~r1', command: 'echo again' })
    await vi.waitFor(() =>
      expect(second.frames.filter((f) => f.type === 'error' && f.code === 'BAD_REQUEST')).toHaveLength(2),
    )
    await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers: runner.auth,
      payload: { command: 'touch go' },
    })
    expect(await fromA).toEqual({ stdout: 'from-a\n', stderr: '', code: 0 })
    const exits = () => second.frames.filter((f) => f.type === 'shell_exit')
    await vi.waitFor(() => expect(exits()).toHaveLength(2))
    expect(exits().map((f) => [f.id, f.code])).toEqual([
      ['r1', 4],
      ['~r1', 5],
    ])
    const out = (runId: string) =>
      second.frames
        .filter((f) => f.type === 'shell_out' && f.id === runId)
        .map((f) => String(f.data))
        .join('')
    expect([out('r1'), out('~r1')]).toEqual(['b-one\n', 'b-two\n'])
    // A does not see B's runs under its own id, and both of B's ids are free again.
    await second.nextOf('shell_exit', '~r1')
    expect(first.frames.filter((f) => f.id === 'r1' && f.type === 'shell_exit')).toHaveLength(1)
    expect(await second.run('~r1', 'echo free')).toEqual({ stdout: 'free\n', stderr: '', code: 0 })
    expect(await second.run('r1', 'echo free')).toEqual({ stdout: 'free\n', stderr: '', code: 0 })
  })

  it('answers a run id already in flight on the same socket with BAD_REQUEST', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using client = (await openShell(runner, id)).client
    const run = client.run('r1', 'while [ ! -e go ]; do sleep 0.02; done; echo done')
    await client.nextOf('shell_start', 'r1')
    client.send({ type: 'shell_run', id: 'r1', command: 'echo again' })
    const error = await client.nextOf('error', 'r1')
    expect(error).toMatchObject({ code: 'BAD_REQUEST' })
    expect(String(error.message)).toContain('use a new id')
    await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers: runner.auth,
      payload: { command: 'touch go' },
    })
    expect((await run).stdout).toBe('done\n')
  })
})

describe('attack: keep a shell socket after its token expires', () => {
  it('closes the socket with UNAUTHORIZED when the token expires; an API-key socket stays', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const token = generateToken()
    const expiresAt = Date.now() + 1_000
    runner.app.conch.store.addToken({ hash: hashSecret(token), sandboxId: id, expiresAt }, Date.now())
    await using keyed = (await openShell(runner, id)).client
    await using tokened = (await openShell(runner, id, '', token)).client
    expect((await tokened.run('r1', 'echo still-valid')).stdout).toBe('still-valid\n')

    const closed = await tokened.closed
    expect(closed).toEqual({ code: 4401, reason: 'UNAUTHORIZED' })
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt)
    const error = tokened.frames.find((f) => f.type === 'error')
    expect(error).toMatchObject({ code: 'UNAUTHORIZED', details: { expiredAt: expiresAt } })
    expect(String(error?.message)).toContain('the sandbox token this socket was opened with expired at')
    expect((await keyed.run('r2', 'echo served')).stdout).toBe('served\n')
  })
})

describe('attack: send frames the runner cannot read', () => {
  it('answers an invalid UTF-8 text frame with INVALID_FRAME and keeps the socket open', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using client = (await openShell(runner, id)).client
    client.ws.send(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), { binary: false })
    const error = await client.nextOf('error')
    expect(error).toMatchObject({ code: 'INVALID_FRAME', id: null })
    expect(String(error.message)).toContain('UTF-8')
    expect((await client.run('r1', 'echo open')).stdout).toBe('open\n')
  })

  it('closes on a 40 MB frame with an error frame, a typed reason and one warning line', async () => {
    const log: string[] = []
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        log.push(...chunk.toString('utf8').split('\n').filter(Boolean))
        done()
      },
    })
    await using runner = await startRunner({
      listen: true,
      limits: { maxClientFrameBytes: 65_536 },
      logger: { level: 'info', stream: sink },
    })
    const id = await createSandbox(runner)
    await using victim = (await openShell(runner, id)).client
    const { client } = await openShell(runner, id)
    const logged = log.length
    client.ws.send(Buffer.alloc(40 * 1024 * 1024, 0x61), { binary: false })

    expect(await client.closed).toEqual({ code: 1009, reason: 'FRAME_TOO_LARGE' })
    expect(client.frames.find((f) => f.type === 'error')).toMatchObject({
      code: 'FRAME_TOO_LARGE',
      details: { limit: 65_536 },
    })
    const warnings = log.slice(logged).filter((line) => (JSON.parse(line) as { level: number }).level >= 40)
    expect(warnings, warnings.join('\n')).toHaveLength(1)
    expect(warnings[0]).toContain('shell socket closed')
    expect(log.join('\n')).not.toMatch(/"stack"|\n\s+at /)
    expect((await victim.run('r1', 'echo unharmed')).stdout).toBe('unharmed\n')
  })
})

describe('attack: open many shell sockets on one session', () => {
  it('refuses sockets beyond the per-session cap with 429 and admits one when a slot frees', async () => {
    await using runner = await startRunner({ listen: true, limits: { maxSocketsPerSession: 2 } })
    const id = await createSandbox(runner)
    const first = await openShell(runner, id)
    await using second = (await openShell(runner, id, `?sessionId=${first.sessionId}`)).client
    await expect(
      ShellClient.open(shellUrl(runner, id, `?sessionId=${first.sessionId}`), runner.apiKey),
    ).rejects.toThrow('HTTP 429')
    await first.client[Symbol.asyncDispose]()
    await vi.waitFor(async () => {
      await using third = (await openShell(runner, id, `?sessionId=${first.sessionId}`)).client
      expect((await third.run('r1', 'echo admitted')).stdout).toBe('admitted\n')
    })
    expect((await second.run('r2', 'echo kept')).stdout).toBe('kept\n')
  })
})

describe('attack: fill the session limit, then list sessions', () => {
  it('lists the sessions at the limit without opening one', async () => {
    await using runner = await startRunner({ limits: { maxSessionsPerSandbox: 2 } })
    const id = await createSandbox(runner)
    const call = async (method: 'GET' | 'POST', path: string, payload?: object) => {
      const res = await runner.app.inject({
        method,
        url: `/v1/sandboxes/${id}${path}`,
        headers: runner.auth,
        ...(payload ? { payload } : {}),
      })
      return { status: res.statusCode, body: res.json() as unknown }
    }
    expect((await call('GET', '/sessions')).body).toEqual({ sessions: [] })
    expect((await call('POST', '/sessions', { id: 'one' })).status).toBe(200)
    expect((await call('POST', '/sessions', { id: 'two' })).status).toBe(200)
    for (let i = 0; i < 3; i++) {
      const list = await call('GET', '/sessions')
      expect(list.status, JSON.stringify(list.body)).toBe(200)
      expect(SessionList.parse(list.body).sessions.map((s) => s.id)).toEqual(['one', 'two'])
    }
    const third = await call('POST', '/sessions', { id: 'three' })
    expect(ErrorBody.parse(third.body).error.code).toBe('TOO_MANY_SESSIONS')
  })
})
