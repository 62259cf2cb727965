// A peer on the agent's socket that breaks the link's rules, before and after the handshake.
// The agent must drop a connection that sends anything but the handshake first, and after it
// must ignore frames for channels it never opened and keep serving.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { encodeFrame, FrameDecoder } from '@conch/link'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { buildAgent } from '../src/build-agent.ts'
import { systemClock } from '../src/clock.ts'
import { silentLogger } from '../src/logger.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'
import { AgentClient } from './agent-client.ts'

const SECRET = mintLinkSecret()
let agent: { socketPath: string; close: () => Promise<void> }
let dir: string

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'conch-agent-hostile-'))
  const root = join(dir, 'root')
  mkdirSync(root)
  const { server } = buildAgent({
    root,
    baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    spawn: nodeSpawn,
    clock: systemClock,
    logger: silentLogger,
    tempRoot: chooseTempRoot(),
    killGraceMs: 300,
    linkSecret: SECRET,
  })
  const socketPath = join(dir, 'agent.sock')
  await server.listen({ path: socketPath })
  agent = { socketPath, close: () => server.close() }
})
afterEach(async () => {
  await agent.close()
  rmSync(dir, { recursive: true, force: true })
})

/** Opens a raw connection and resolves once the agent has closed it; records what it sent. */
async function rawUntilClosed(write: (socket: Socket) => void): Promise<unknown[]> {
  const socket = connect(agent.socketPath)
  await new Promise<void>((resolve) => socket.once('connect', resolve))
  const got: unknown[] = []
  const decoder = new FrameDecoder()
  socket.on('data', (chunk: Buffer) => {
    for (const r of decoder.push(chunk)) if (r.ok) got.push(r.frame.header)
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
})
