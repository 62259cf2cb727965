import { Sandbox } from '@conch/sdk'
import { describe, expect, it, vi } from 'vitest'
import { WebSocket } from 'ws'
import { baseUrl, createSandbox, startRunner, type TestRunner } from './runner-fixture.ts'
import { screenOf } from './terminal-screen.ts'
import { rawSocket } from './terminal-socket-client.ts'

// Terminals through the real runner (local driver, a real agent and node-pty) and the SDK, and
// the terminal socket attacked directly: foreign and expired tokens, hostile frames, floods.

async function token(runner: TestRunner, id: string, ttlMs = 600_000): Promise<string> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/tokens`,
    headers: runner.auth,
    payload: { ttlMs },
  })
  return (res.json() as { token: string }).token
}

describe('terminals through the runner', () => {
  it('types cd /tmp; pwd, resizes, and a second client with a sandbox token replays the same screen', async () => {
    await using runner = await startRunner({ listen: true })
    const url = baseUrl(runner.app)
    await using sb = await Sandbox.create({ url, apiKey: runner.apiKey, WebSocket })
    const term = await sb.terminal({ cols: 80, rows: 24, command: ['bash', '--norc'] })
    const screen = screenOf(term)
    term.write('cd /tmp; pwd\r')
    await screen.until(/[\r\n]\/tmp\r\n/)
    expect((await term.resize(120, 40)).cols).toBe(120)
    term.write('stty size\r')
    await screen.until(/40 120\r\n/)
    expect((await sb.listTerminals()).map((t) => t.id)).toEqual([term.id])

    const { token: secret } = await sb.createAccessToken({ ttlMs: 60_000 })
    await using other = await Sandbox.connect(sb.id, { url, token: secret, WebSocket })
    const again = await other.attachTerminal(term.id, { offset: 0 })
    const replay = screenOf(again)
    await replay.until(/40 120\r\n/)
    again.write('echo from-second\r')
    await screen.until(/from-second\r\n/)

    term.detach()
    again.write('exit\r')
    expect(await again.exited).toEqual({ code: 0, signal: null })
    expect((await sb.listTerminals())[0]?.exitCode).toBe(0)
  })

  it('a client still attached when its sandbox is deleted ends its terminal; the failed reattach throws nothing out of the process', async () => {
    await using runner = await startRunner({ listen: true })
    const sb = await Sandbox.create({ url: baseUrl(runner.app), apiKey: runner.apiKey, WebSocket })
    const term = await sb.terminal({ command: ['bash', '--norc'] })
    const screen = screenOf(term)
    term.write('echo attached\r')
    await screen.until(/[\r\n]attached\r\n/)
    await sb.destroy()
    // The socket drops; the SDK tries to reattach and the runner answers the upgrade with 404.
    // Node's ws emits that as an error event: unheard, it would escape as an uncaught exception.
    expect(await term.exited).toEqual({ code: null, signal: null })
    expect(() => term.write('x')).toThrow(/not attached/)
  })

  it('attacks: a token for sandbox A cannot open B’s terminal; expired and unknown tokens are refused', async () => {
    let clock = 1_000_000
    await using runner = await startRunner({ listen: true, now: () => clock })
    const url = baseUrl(runner.app)
    const a = await createSandbox(runner)
    const b = await createSandbox(runner)
    const opened = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${b}/terminals`,
      headers: runner.auth,
      payload: { command: ['bash', '--norc'] },
    })
    const terminalB = (opened.json() as { id: string }).id
    const tokenA = await token(runner, a)
    const ws = url.replace('http', 'ws')

    const foreign = rawSocket(`${ws}/v1/sandboxes/${b}/terminals/${terminalB}/socket`, tokenA)
    expect(await foreign.refused).toBe(403)
    // The right terminal id under the token's own sandbox: that sandbox has no such terminal.
    const wrongBox = rawSocket(`${ws}/v1/sandboxes/${a}/terminals/${terminalB}/socket`, tokenA)
    expect(await wrongBox.frame((f) => f.type === 'error')).toMatchObject({ code: 'TERMINAL_NOT_FOUND' })
    expect(await wrongBox.closed).toBe(4404)
    const rest = await runner.app.inject({
      method: 'GET',
      url: `/v1/sandboxes/${b}/terminals`,
      headers: { authorization: `Bearer ${tokenA}` },
    })
    expect(rest.statusCode).toBe(403)

    const unknown = rawSocket(`${ws}/v1/sandboxes/${b}/terminals/${terminalB}/socket`, 'cst_stolen0000000000')
    expect(await unknown.refused).toBe(401)

    const shortToken = await token(runner, b, 60_000)
    const live = rawSocket(`${ws}/v1/sandboxes/${b}/terminals/${terminalB}/socket`, shortToken)
    await live.frame((f) => f.type === 'terminal_ready')
    clock += 120_000
    const late = rawSocket(`${ws}/v1/sandboxes/${b}/terminals/${terminalB}/socket`, shortToken)
    expect(await late.refused).toBe(401)
  })

  it('attacks: a socket opened with a sandbox token closes with 4401 when the token expires', async () => {
    await using runner = await startRunner({ listen: true })
    const url = baseUrl(runner.app)
    const id = await createSandbox(runner)
    const opened = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/terminals`,
      headers: runner.auth,
      payload: { command: ['bash', '--norc'] },
    })
    const t = (opened.json() as { id: string }).id
    const shortLived = await token(runner, id, 1_500)
    const sock = rawSocket(
      `${url.replace('http', 'ws')}/v1/sandboxes/${id}/terminals/${t}/socket`,
      shortLived,
    )
    await sock.frame((f) => f.type === 'terminal_ready')
    expect(await sock.closed).toBe(4401)
    expect(sock.frames.find((f) => f.type === 'error')).toMatchObject({ code: 'UNAUTHORIZED' })
    // The terminal itself lives on for holders of a valid credential.
    const info = await runner.app.inject({
      method: 'GET',
      url: `/v1/sandboxes/${id}/terminals/${t}`,
      headers: runner.auth,
    })
    expect(info.json()).toMatchObject({ id: t, exitCode: null })
  })

  it('attacks: hostile resizes, NaN, huge input, unknown frames keep the socket open; input after close is refused', async () => {
    await using runner = await startRunner({ listen: true })
    const url = baseUrl(runner.app)
    const id = await createSandbox(runner)
    const opened = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/terminals`,
      headers: runner.auth,
      payload: { command: ['bash', '--norc'] },
    })
    const t = (opened.json() as { id: string }).id
    const sock = rawSocket(
      `${url.replace('http', 'ws')}/v1/sandboxes/${id}/terminals/${t}/socket`,
      runner.apiKey,
    )
    await sock.frame((f) => f.type === 'terminal_ready')
    const hostile = [
      '{"type":"resize","cols":0,"rows":24}',
      '{"type":"resize","cols":-1,"rows":24}',
      '{"type":"resize","cols":100000000,"rows":24}',
      '{"type":"resize","cols":NaN,"rows":24}',
      '{"type":"resize","cols":null,"rows":24}',
      '{"type":"signal","signal":"SIGSTOP; rm -rf /"}',
      '{"type":"nope"}',
      'not json',
    ]
    for (const text of hostile) sock.ws.send(text)
    await sock.frame(() => sock.frames.filter((f) => f.type === 'error').length === hostile.length)
    expect(sock.frames.filter((f) => f.type === 'error').map((f) => f.code)).toEqual(
      hostile.map(() => 'INVALID_FRAME'),
    )
    sock.ws.send(Buffer.alloc(1_000_000, 0x61))
    await sock.frame((f) => f.code === 'FRAME_TOO_LARGE')
    for (const [cols, rows] of [
      [0, 10],
      [10, -3],
      [2 ** 40, 10],
    ]) {
      const res = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/terminals/${t}/resize`,
        headers: runner.auth,
        payload: { cols, rows },
      })
      expect(res.statusCode).toBe(400)
    }
    // Still alive and typing works after all that.
    sock.ws.send(Buffer.from('echo still-$((6*7))\r'))
    await sock.frame(() => Buffer.concat(sock.binary).includes('still-42'))

    const del = await runner.app.inject({
      method: 'DELETE',
      url: `/v1/sandboxes/${id}/terminals/${t}`,
      headers: runner.auth,
    })
    expect(del.statusCode).toBe(200)
    await sock.closed
    const again = await runner.app.inject({
      method: 'GET',
      url: `/v1/sandboxes/${id}/terminals/${t}`,
      headers: runner.auth,
    })
    expect(again.json()).toMatchObject({ error: { code: 'TERMINAL_NOT_FOUND' } })
    const after = rawSocket(
      `${url.replace('http', 'ws')}/v1/sandboxes/${id}/terminals/${t}/socket`,
      runner.apiKey,
    )
    expect(await after.frame((f) => f.type === 'error')).toMatchObject({ code: 'TERMINAL_NOT_FOUND' })
  })

  it('attacks: too many terminals get TOO_MANY_TERMINALS; a flood to a client that stops reading stalls the program', async () => {
    await using runner = await startRunner({ listen: true })
    const url = baseUrl(runner.app)
    const id = await createSandbox(runner)
    const open = (command: string[]) =>
      runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/terminals`,
        headers: runner.auth,
        payload: { command },
      })
    for (let i = 1; i < 16; i++) expect((await open(['sleep', '600'])).statusCode).toBe(200)
    const flood = (await open(['yes', 'flood-flood-flood'])).json() as { id: string }
    const refused = await open(['sleep', '600'])
    expect(refused.statusCode).toBe(429)
    expect(refused.json()).toMatchObject({ error: { code: 'TOO_MANY_TERMINALS', details: { limit: 16 } } })

    const sock = rawSocket(
      `${url.replace('http', 'ws')}/v1/sandboxes/${id}/terminals/${flood.id}/socket`,
      runner.apiKey,
    )
    await sock.frame((f) => f.type === 'terminal_ready')
    // Stop reading: the client's TCP window fills, the runner stops granting credit, the agent
    // stops reading the pty, and `yes` blocks on a full pty.
    const raw = (sock.ws as unknown as { _socket: { pause(): void } })._socket
    raw.pause()
    const endOffset = async () =>
      (
        (
          await runner.app.inject({
            method: 'GET',
            url: `/v1/sandboxes/${id}/terminals/${flood.id}`,
            headers: runner.auth,
          })
        ).json() as {
          endOffset: number
        }
      ).endOffset
    // Stalled means the log's end stops moving between two looks.
    let current = await endOffset()
    await vi.waitFor(
      async () => {
        const previous = current
        current = await endOffset()
        expect(current).toBe(previous)
      },
      { timeout: 60_000, interval: 300 },
    )
    // Unthrottled, `yes` writes hundreds of MiB a second; stalled, the program has written only
    // what the channel window, the sockets' buffers and the pty hold.
    expect(current).toBeLessThan(32 * 1024 * 1024)
    sock.ws.terminate()
  }, 120_000)
})
