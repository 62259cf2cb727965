// A peer on the agent's socket that breaks the link's rules, before and after the handshake.
// The agent must drop a connection that sends anything but the handshake first, and after it
// must ignore frames for channels it never opened and keep serving.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { encodeFrame, FrameDecoder } from '@conch/link'
import { LINK_VERSION } from '@conch/protocol'
import { linkNonce, linkProof, mintLinkSecret } from '@conch/protocol/link-proof'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { buildAgent } from '../src/build-agent.ts'
import { systemClock } from '../src/clock.ts'
import { silentLogger } from '../src/logger.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'
import { AgentClient } from './agent-client.ts'

const SECRET = mintLinkSecret()
let agent: { socketPath: string; close: () => Promise<void> }
let dir: string

/** Starts an agent on `name` in the test's dir, with the link secret SECRET. */
async function serveAgent(
  name: string,
  options: { handshakeTimeoutMs?: number } = {},
): Promise<{ socketPath: string; close: () => Promise<void> }> {
  const root = join(dir, 'root')
  mkdirSync(root, { recursive: true })
  const { server } = buildAgent({
    root,
    baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    spawn: nodeSpawn,
    clock: systemClock,
    logger: silentLogger,
    tempRoot: chooseTempRoot(),
    killGraceMs: 300,
    linkSecret: SECRET,
    ...options,
  })
  const socketPath = join(dir, name)
  await server.listen({ path: socketPath })
  return { socketPath, close: () => server.close() }
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'conch-agent-hostile-'))
  agent = await serveAgent('agent.sock')
})
afterEach(async () => {
  await agent.close()
  rmSync(dir, { recursive: true, force: true })
})

/** Opens a raw connection and resolves once the agent has closed it; records what it sent. */
async function rawUntilClosed(
  write: (socket: Socket) => void,
  onFrame: (header: unknown, socket: Socket) => void = () => {},
): Promise<unknown[]> {
  const socket = connect(agent.socketPath)
  await new Promise<void>((resolve) => socket.once('connect', resolve))
  const got: unknown[] = []
  const decoder = new FrameDecoder()
  socket.on('data', (chunk: Buffer) => {
    for (const r of decoder.push(chunk)) {
      if (!r.ok) continue
      got.push(r.frame.header)
      onFrame(r.frame.header, socket)
    }
  })
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  socket.on('error', () => {})
  write(socket)
  await closed
  return got
}

describe('hostile peers on the agent link', () => {
  it('drops a connection whose first frame is a ping, without answering it', async () => {
    const got = await rawUntilClosed((s) => s.write(encodeFrame({ type: 'ping', n: 1 })))
    expect(got).toEqual([])
  })

  it('drops a connection that opens with garbage or an oversize length', async () => {
    expect(await rawUntilClosed((s) => s.write(Buffer.from('GET / HTTP/1.1\r\n\r\n')))).toEqual([])
    expect(await rawUntilClosed((s) => s.write(Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3])))).toEqual([])
  })

  it('drops a call sent before the handshake and never answers it', async () => {
    const got = await rawUntilClosed((s) =>
      s.write(encodeFrame({ type: 'call', id: 1, method: 'session.list', params: {} })),
    )
    expect(got).toEqual([])
  })

  it('answers the hello of a runner of another link version, then refuses its auth even with the right proof', async () => {
    const got = await rawUntilClosed(
      (s) =>
        s.write(
          encodeFrame({
            type: 'hello',
            linkVersion: LINK_VERSION + 1,
            protocolVersion: 1,
            nonce: linkNonce(),
          }),
        ),
      (header, s) => {
        // Prove the secret for real: only the link version is wrong.
        const { nonce } = header as { nonce: string }
        s.write(encodeFrame({ type: 'auth', proof: linkProof(SECRET, 'runner', nonce) }))
        s.write(encodeFrame({ type: 'call', id: 1, method: 'session.list', params: {} }))
      },
    )
    expect(got).toHaveLength(1)
    expect(got[0]).toMatchObject({ type: 'hello', linkVersion: LINK_VERSION })
  })

  it('drops the hello of a runner of link 1 (discriminated on t) without answering it', async () => {
    const got = await rawUntilClosed((s) =>
      s.write(encodeFrame({ t: 'hello', protocolVersion: 1, nonce: linkNonce() })),
    )
    expect(got).toEqual([])
  })

  it('ignores credit, close, data and end for channels it never opened, and keeps serving', async () => {
    const c = await AgentClient.connect(agent.socketPath, SECRET)
    c.send({ type: 'credit', ch: 99, bytes: 2 ** 31 })
    c.send({ type: 'credit', ch: 2 ** 31, bytes: Number.MAX_SAFE_INTEGER })
    c.send({ type: 'close', ch: 12345 })
    c.send({ type: 'data', ch: 77 }, new Uint8Array(1000))
    c.send({ type: 'end', ch: 77 })
    const listed = await c.call<{ sessions: unknown[] }>('session.list', {})
    expect(listed.sessions.length).toBeGreaterThan(0)
    c.close()
  })

  it('answers a credit beyond a safe integer with an error frame, not a crash', async () => {
    const c = await AgentClient.connect(agent.socketPath, SECRET)
    c.send({ type: 'credit', ch: 1, bytes: 2 ** 60 })
    const error = await c.waitFor((f) => f.type === 'error')
    expect(error).toMatchObject({ type: 'error', error: { code: 'INVALID_FRAME' } })
    await expect(c.call('session.list', {})).resolves.toBeDefined()
    c.close()
  })

  it('answers hostile frames with typed errors and keeps serving (wrong types, prototype keys, huge strings, deep nesting)', async () => {
    const c = await AgentClient.connect(agent.socketPath, SECRET)
    const hostile: [unknown, string][] = [
      [{ type: 'credit', ch: '1', bytes: 1 }, 'INVALID_FRAME'],
      [{ type: 'credit', ch: 1.5, bytes: 1 }, 'INVALID_FRAME'],
      [{ type: 'close' }, 'INVALID_FRAME'],
      [{ type: 7 }, 'INVALID_FRAME'],
      [[{ type: 'ping', n: 1 }], 'INVALID_FRAME'],
      [{ type: '__proto__', ch: 1 }, 'UNKNOWN_FRAME_TYPE'],
      [{ type: 'constructor', ch: 1 }, 'UNKNOWN_FRAME_TYPE'],
      [{ type: 'toString' }, 'UNKNOWN_FRAME_TYPE'],
      [{ type: 'x'.repeat(500_000) }, 'UNKNOWN_FRAME_TYPE'],
      [{ type: 'end', ch: JSON.parse(`${'['.repeat(1000)}${']'.repeat(1000)}`) }, 'INVALID_FRAME'],
      [JSON.parse('{"type": "close", "__proto__": {"ch": 1}}'), 'INVALID_FRAME'],
    ]
    // The agent's error frames as it wrote them, before the client's own parse bounds them.
    const raw: { code: string; message: string }[] = []
    const decoder = new FrameDecoder()
    c.socket.on('data', (chunk: Buffer) => {
      for (const r of decoder.push(chunk)) {
        const header = r.ok
          ? (r.frame.header as { type?: string; error?: { code: string; message: string } })
          : {}
        if (header.type === 'error' && header.error) raw.push(header.error)
      }
    })
    for (const [frame] of hostile) c.send(frame)
    await vi.waitFor(() => expect(raw).toHaveLength(hostile.length))
    expect(raw.map((e) => e.code)).toEqual(hostile.map(([, code]) => code))
    for (const e of raw) expect(e.message.length).toBeLessThan(1000)
    // Extra keys are dropped, as the schema says: the frame is served, not refused.
    c.send({ type: 'credit', ch: 99, bytes: 1, junk: 'x'.repeat(100_000), constructor: 1 })
    await expect(c.call('session.list', {})).resolves.toBeDefined()
    c.close()
  })

  it('fails hostile calls with BAD_REQUEST, never pollutes Object.prototype, and keeps serving', async () => {
    const c = await AgentClient.connect(agent.socketPath, SECRET)
    const refused = async (method: string, params: unknown): Promise<string> => {
      const error = await c.call(method, params).then(
        () => undefined,
        (e: { code?: string; message: string }) => e,
      )
      expect(error, `${method} ${JSON.stringify(params)?.slice(0, 80)}`).toMatchObject({
        code: 'BAD_REQUEST',
      })
      return error?.message ?? ''
    }
    expect(await refused('__proto__', {})).toContain('unknown method')
    expect(await refused('constructor', {})).toContain('unknown method')
    expect(await refused('hasOwnProperty', {})).toContain('unknown method')
    expect(await refused('session.run', { sessionId: 5, id: 'r', command: 'true', buffer: true })).toContain(
      'invalid params for session.run: sessionId',
    )
    expect(
      await refused('session.run', { sessionId: 'default', id: '', command: 'true', buffer: true }),
    ).toContain('id')
    expect(await refused('session.create', { env: { A: 'x\0y' } })).toContain('values may not contain NUL')
    expect(await refused('file.stat', { path: '/workspace/a\0b' })).toContain('paths may not contain NUL')
    expect(await refused('session.create', { cwd: 'x'.repeat(5000) })).toContain('cwd')
    expect(
      await refused('session.stdin', { sessionId: 'default', id: 'r', data: 'A'.repeat(2_000_000) }),
    ).toContain('data')
    expect(
      await refused('session.create', { id: JSON.parse(`${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`) }),
    ).toContain('id')
    expect(await refused('process.kill', { id: 'proc_abcd', signal: 'SIGSTOP' })).toContain('signal')
    // Prototype keys in params: never copied, so nothing reaches Object.prototype.
    const hostile = JSON.parse(
      '{"id": "s-proto", "env": {"__proto__": {"polluted": "yes"}, "A": "b"}, "__proto__": {"polluted": "yes"}, "constructor": {"prototype": {"polluted": "yes"}}}',
    )
    const created = await c.call<{ id: string }>('session.create', hostile)
    expect(created.id).toBe('s-proto')
    const env = await c.call<{ env: Record<string, string> }>('session.env.list', { sessionId: 's-proto' })
    expect(env.env.A).toBe('b')
    expect(Object.hasOwn(env.env, '__proto__')).toBe(false)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    await expect(c.call('session.list', {})).resolves.toBeDefined()
    c.close()
  })

  it('drops a peer still in its handshake when it closes, instead of waiting out the handshake timeout', async () => {
    // An hour to prove the secret: a close that waited for it would outlast the test.
    const slow = await serveAgent('slow.sock', { handshakeTimeoutMs: 3_600_000 })
    const socket = connect(slow.socketPath)
    socket.on('error', () => {})
    const decoder = new FrameDecoder()
    const hello = new Promise<void>((resolve) =>
      socket.on('data', (chunk: Buffer) => {
        if (decoder.push(chunk).some((r) => r.ok)) resolve()
      }),
    )
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    // The runner's hello, answered by the agent's; then no auth, ever.
    socket.write(
      encodeFrame({ type: 'hello', linkVersion: LINK_VERSION, protocolVersion: 1, nonce: linkNonce() }),
    )
    await hello
    await slow.close()
    await closed
  })
})
