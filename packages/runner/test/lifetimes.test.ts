// Idle lifetimes against a real runner, real agents and a real snapshot store, on a fake clock:
// the test moves the clock and runs one sweep itself (`manager.lifetimes.sweep()`), so nothing
// depends on how long a step takes. Hibernation by idle timer and the wake on every kind of
// request, what keeps a sandbox awake, deletion after the TTL, idle sessions and a restart.
// The attacks are in lifetimes-attacks.test.ts.
import { createServer } from 'node:net'
import { describe, expect, it, vi } from 'vitest'
import { WebSocket } from 'ws'
import { create, exec, IDLE, info, lifetimeRunner, MIN, status } from './lifetime-fixture.ts'
import { PORT_SERVER } from './ports/port-fixture.ts'
import { baseUrl, shellUrl, tempStateDir } from './runner-fixture.ts'
import { ShellClient } from './shell-client.ts'

describe('idle hibernation', () => {
  it('hibernates an idle sandbox and wakes it on a shell attach that sees `resumed`, with its shell state', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    expect((await exec(runner, id, 'cd /tmp && export KEPT=yes')).statusCode).toBe(200)
    await sweep(10 * MIN - 1)
    expect(status(runner, id)).toBe('running')
    await sweep(1)
    expect(status(runner, id)).toBe('hibernated')
    const listed = await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: runner.auth })
    const row = (listed.json() as { sandboxes: { id: string; status: string }[] }).sandboxes.find(
      (s) => s.id === id,
    )
    expect(row?.status).toBe('hibernated')

    await using client = await ShellClient.open(shellUrl(runner, id, '?sessionId=default'), runner.apiKey)
    const ready = await client.nextOf('shell_ready')
    expect(ready.resumed).toMatchObject({ snapshotId: expect.stringMatching(/^snap_/) })
    expect((await client.run('r1', 'echo "$KEPT $PWD"')).stdout).toBe('yes /tmp\n')
    expect(status(runner, id)).toBe('running')
  })

  it('wakes a hibernated sandbox on a REST run', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    await exec(runner, id, 'echo kept > note')
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
    const res = await exec(runner, id, 'cat note')
    expect(res.statusCode, res.body).toBe(200)
    expect((res.json() as { stdout: string }).stdout).toBe('kept\n')
    expect((await info(runner, id)).status).toBe('running')
  })

  it('wakes a hibernated sandbox on a port request, its server started again', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    const port = await freePort()
    const base = `${baseUrl(runner.app)}/v1/sandboxes/${id}`
    const put = await fetch(`${base}/files?path=/workspace/srv.js`, {
      method: 'PUT',
      headers: runner.auth,
      body: PORT_SERVER,
    })
    expect(put.status).toBe(200)
    const started = await fetch(`${base}/processes`, {
      method: 'POST',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ command: `PORT=${port} exec node srv.js srv` }),
    })
    expect(started.status).toBe(200)
    const echo = `${base}/ports/${port}/echo/x`
    await vi.waitFor(async () => expect((await fetch(echo, { headers: runner.auth })).status).toBe(200), {
      timeout: 20_000,
      interval: 100,
    })
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
    // The first request wakes it; its server, restarted with it, answers once it listens again.
    await fetch(echo, { headers: runner.auth }).then((r) => r.arrayBuffer())
    expect(status(runner, id)).toBe('running')
    await vi.waitFor(async () => expect((await fetch(echo, { headers: runner.auth })).status).toBe(200), {
      timeout: 20_000,
      interval: 100,
    })
  })

  it('keeps a sandbox awake while a shell is attached, and hibernates it once the shell leaves', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    const client = await ShellClient.open(shellUrl(runner, id, '?sessionId=default'), runner.apiKey)
    await client.nextOf('shell_ready')
    await sweep(30 * MIN)
    expect(status(runner, id)).toBe('running')
    await client[Symbol.asyncDispose]()
    await vi.waitFor(() => expect(runner.app.conch.manager.get(id).attached).toBe(0))
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
  })

  it('keeps a sandbox awake while a terminal or a process output follower is attached', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    const base = `${baseUrl(runner.app)}/v1/sandboxes/${id}`
    const made = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/terminals`,
      headers: runner.auth,
      payload: { command: ['bash', '--norc'] },
    })
    expect(made.statusCode, made.body).toBe(200)
    const terminalId = (made.json() as { id: string }).id
    const term = new WebSocket(`${base.replace('http', 'ws')}/terminals/${terminalId}/socket`, [
      'conch.terminal.v1',
      `bearer.${runner.apiKey}`,
    ])
    const termClosed = new Promise((resolve) => term.on('close', resolve))
    await new Promise<void>((resolve, reject) => {
      term.on('message', (data, isBinary) => {
        if (!isBinary && (JSON.parse(String(data)) as { type: string }).type === 'terminal_ready') resolve()
      })
      term.on('error', reject)
    })
    const started = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/processes`,
      headers: runner.auth,
      // Output first: the stream's headers go out with its first line.
      payload: { command: 'echo started; sleep 600' },
    })
    const processId = (started.json() as { id: string }).id
    const follow = new AbortController()
    const stream = await fetch(`${base}/processes/${processId}/stream`, {
      headers: runner.auth,
      signal: follow.signal,
    })
    expect(stream.status).toBe(200)
    expect(runner.app.conch.manager.get(id).attached).toBe(2)
    await sweep(30 * MIN)
    expect(status(runner, id)).toBe('running')
    term.close()
    await termClosed
    await sweep(30 * MIN)
    expect(status(runner, id)).toBe('running')
    follow.abort()
    await vi.waitFor(() => expect(runner.app.conch.manager.get(id).attached).toBe(0))
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
  })

  it('keeps a sandbox awake while a command a client left runs in it', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    const client = await ShellClient.open(shellUrl(runner, id, '?sessionId=default'), runner.apiKey)
    await client.nextOf('shell_ready')
    client.send({ type: 'shell_run', id: 'long', command: 'sleep 600' })
    await client.nextOf('shell_start', 'long')
    await client[Symbol.asyncDispose]()
    await vi.waitFor(() => expect(runner.app.conch.manager.get(id).attached).toBe(0))
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('running')
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('running')
  })

  it('does not delete a sandbox while a command a client left runs in it', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, { hibernateAfterMs: null, idleTimeoutMs: 10 * MIN })
    const client = await ShellClient.open(shellUrl(runner, id, '?sessionId=default'), runner.apiKey)
    await client.nextOf('shell_ready')
    client.send({ type: 'shell_run', id: 'long', command: 'sleep 600' })
    await client.nextOf('shell_start', 'long')
    await client[Symbol.asyncDispose]()
    await vi.waitFor(() => expect(runner.app.conch.manager.get(id).attached).toBe(0))
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('running')
    await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/sessions/default/interrupt`,
      headers: runner.auth,
      payload: {},
    })
    await vi.waitFor(async () => {
      const got = await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${id}/sessions/default`,
        headers: runner.auth,
      })
      expect((got.json() as { running: string | null }).running).toBeNull()
    })
    await sweep(10 * MIN)
    expect(status(runner, id)).toBeUndefined()
  })

  it('keeps a sandbox awake for its keep-alive, then hibernates it', async () => {
    const { runner, clock, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    const kept = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/keep-alive`,
      headers: runner.auth,
      payload: { durationMs: 30 * MIN },
    })
    expect(kept.statusCode, kept.body).toBe(200)
    expect((kept.json() as { keepAliveUntil: number }).keepAliveUntil).toBe(clock.now + 30 * MIN)
    await sweep(20 * MIN)
    expect(status(runner, id)).toBe('running')
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('running')
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
  })

  it('keeps a sandbox awake while a process started with keepAlive runs, and not once it ended', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    const start = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/processes`,
      headers: runner.auth,
      payload: { command: 'sleep 6000', keepAlive: true },
    })
    expect(start.statusCode, start.body).toBe(200)
    const processId = (start.json() as { id: string }).id
    await sweep(30 * MIN)
    expect(status(runner, id)).toBe('running')
    const killed = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/processes/${processId}/kill`,
      headers: runner.auth,
      payload: {},
    })
    expect(killed.statusCode, killed.body).toBe(200)
    await vi.waitFor(async () => {
      const got = await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${id}/processes/${processId}`,
        headers: runner.auth,
      })
      expect((got.json() as { status: string }).status).not.toBe('running')
    })
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
  })

  it('does not hibernate a sandbox created with hibernateAfterMs: null', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, { ...IDLE, hibernateAfterMs: null })
    expect((await info(runner, id)).hibernateAfterMs).toBeNull()
    await sweep(59 * MIN)
    expect(status(runner, id)).toBe('running')
  })

  it('deletes a hibernated sandbox and its snapshot after its idle timeout', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, IDLE)
    await sweep(10 * MIN)
    expect(status(runner, id)).toBe('hibernated')
    await sweep(49 * MIN)
    expect(status(runner, id)).toBe('hibernated')
    await sweep(1 * MIN)
    expect(status(runner, id)).toBeUndefined()
    const snapshots = await runner.app.inject({ method: 'GET', url: '/v1/snapshots', headers: runner.auth })
    expect(
      (snapshots.json() as { snapshots: { sandboxId: string }[] }).snapshots.map((s) => s.sandboxId),
    ).not.toContain(id)
  })

  it('keeps a sandbox hibernated by idle through a runner restart and wakes it after', async () => {
    using dir = tempStateDir('conch-lifetimes-')
    const stateDir = dir.path
    const first = await lifetimeRunner({ stateDir })
    await using _first = first.runner
    const id = await create(first.runner, IDLE)
    await exec(first.runner, id, 'export SURVIVED=yes')
    await first.sweep(10 * MIN)
    expect(status(first.runner, id)).toBe('hibernated')
    await first.runner[Symbol.asyncDispose]()

    const second = await lifetimeRunner({ stateDir })
    await using _ = second.runner
    expect((await info(second.runner, id)).status).toBe('hibernated')
    const res = await exec(second.runner, id, 'echo "$SURVIVED"')
    expect(res.statusCode, res.body).toBe(200)
    expect((res.json() as { stdout: string }).stdout).toBe('yes\n')
  })
})

describe('idle sessions', () => {
  it('deletes a session no client came back to, but not one running a command, nor the default', async () => {
    const { runner, sweep } = await lifetimeRunner()
    await using _ = runner
    const id = await create(runner, {
      hibernateAfterMs: null,
      idleTimeoutMs: null,
      sessionIdleTimeoutMs: 5 * MIN,
    })
    for (const session of ['left', 'busy']) {
      const made = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/sessions`,
        headers: runner.auth,
        payload: { id: session },
      })
      expect(made.statusCode, made.body).toBe(200)
    }
    await exec(runner, id, 'true')
    const client = await ShellClient.open(shellUrl(runner, id, '?sessionId=busy'), runner.apiKey)
    await client.nextOf('shell_ready')
    client.send({ type: 'shell_run', id: 'long', command: 'sleep 600' })
    await client.nextOf('shell_start', 'long')
    await client[Symbol.asyncDispose]()
    await vi.waitFor(() => expect(runner.app.conch.manager.get(id).attached).toBe(0))
    const sessions = async () => {
      const res = await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${id}/sessions`,
        headers: runner.auth,
      })
      return (res.json() as { sessions: { id: string }[] }).sessions.map((s) => s.id).sort()
    }
    await sweep(5 * MIN - 1)
    expect(await sessions()).toEqual(['busy', 'default', 'left'])
    await sweep(1)
    expect(await sessions()).toEqual(['busy', 'default'])
  })
})

/** A TCP port free on the host now (the local driver's sandboxes share the host's network). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}
