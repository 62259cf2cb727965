import { mkdtempSync, rmSync } from 'node:fs'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { encodeFrame, FrameDecoder } from '@conch/link'
import { LIMITS, LINK_VERSION } from '@conch/protocol'
import { linkProof, mintLinkSecret } from '@conch/protocol/link-proof'
import pino from 'pino'
import { describe, expect, it } from 'vitest'
import { AgentLink } from './agent-link.ts'
import type { ChannelEvent } from './runner-channel.ts'

const SECRET = mintLinkSecret()

/** A small agent peer on a real Unix socket: speaks the real frames, with a scripted method table. */
class PeerAgent implements AsyncDisposable {
  readonly server: Server
  readonly dir = mkdtempSync(join(tmpdir(), 'conch-link-'))
  readonly path = join(this.dir, 'agent.sock')
  readonly received: Record<string, unknown>[] = []
  credit = 0
  socket: Socket | null = null
  #onCredit: (() => void) | null = null
  readonly handle: (peer: PeerAgent, frame: Record<string, unknown>) => void

  constructor(handle: (peer: PeerAgent, frame: Record<string, unknown>) => void) {
    this.handle = handle
    this.server = createServer((socket) => {
      this.socket = socket
      const decoder = new FrameDecoder()
      socket.on('data', (chunk) => {
        for (const r of decoder.push(chunk)) {
          if (!r.ok) continue
          const frame = r.frame.header as Record<string, unknown>
          this.received.push(frame)
          if (frame.type === 'hello') {
            this.send({
              type: 'hello',
              linkVersion: LINK_VERSION,
              agentVersion: '0.0.0',
              pid: 1,
              startedAt: 5,
              nonce: '0'.repeat(64),
              proof: linkProof(SECRET, 'agent', String(frame.nonce)),
            })
          } else if (frame.type === 'credit') {
            this.credit += Number(frame.bytes)
            this.#onCredit?.()
          } else this.handle(this, frame)
        }
      })
    })
  }

  static async start(handle: (peer: PeerAgent, frame: Record<string, unknown>) => void): Promise<PeerAgent> {
    const peer = new PeerAgent(handle)
    await new Promise<void>((resolve) => peer.server.listen(peer.path, resolve))
    return peer
  }

  send(header: unknown, payload?: Uint8Array): void {
    this.socket?.write(encodeFrame(header, payload))
  }

  waitCredit(): Promise<void> {
    return new Promise((resolve) => {
      this.#onCredit = resolve
    })
  }

  connect(): Promise<Socket> {
    return new Promise((resolve) => {
      const s = connect(this.path, () => resolve(s))
    })
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.socket?.destroy()
    await new Promise((resolve) => this.server.close(resolve))
    rmSync(this.dir, { recursive: true, force: true })
  }
}

const logger = pino({ level: 'silent' })

describe('AgentLink', () => {
  it('completes the hello handshake and parses call results with the method schema', async () => {
    await using peer = await PeerAgent.start((p, f) => {
      if (f.method === 'session.env.get') p.send({ type: 'result', id: f.id, result: { value: 'v' } })
      else p.send({ type: 'fail', id: f.id, error: { code: 'SESSION_NOT_FOUND', message: 'no session x' } })
    })
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    expect(link.hello).toMatchObject({ pid: 1, startedAt: 5 })
    await expect(link.call('session.env.get', { sessionId: 'default', name: 'A' })).resolves.toEqual({
      value: 'v',
    })
    await expect(link.call('session.get', { sessionId: 'x' })).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    })
    link.close()
  })

  it('rejects a result that does not match the method schema as INTERNAL', async () => {
    await using peer = await PeerAgent.start((p, f) =>
      p.send({ type: 'result', id: f.id, result: { value: 42 } }),
    )
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    await expect(link.call('session.env.get', { sessionId: 'default', name: 'A' })).rejects.toMatchObject({
      code: 'INTERNAL',
    })
    link.close()
  })

  it('ignores malformed and unknown frames and keeps serving calls', async () => {
    await using peer = await PeerAgent.start((p, f) => {
      p.socket?.write(Buffer.from([0, 0, 0, 6, 0, 0, 0, 2, 123, 125]))
      p.send({ type: 'bogus' })
      p.send({ type: 'data', ch: 'x' })
      p.send({ type: 'result', id: f.id, result: {} })
    })
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    await expect(link.call('session.delete', { sessionId: 's' })).resolves.toEqual({})
    link.close()
  })

  it('delivers channel events in order and grants credit as the consumer releases bytes', async () => {
    const chunk = new Uint8Array(LIMITS.maxDataChunkBytes).fill(97)
    await using peer = await PeerAgent.start((p, f) => {
      if (f.type !== 'call') return
      const ch = (f.params as { ch: number }).ch
      p.send({ type: 'result', id: f.id, result: {} })
      for (let i = 0; i < 16; i++) {
        p.send({ type: 'shell_out', ch, id: 'r', offset: i * chunk.byteLength }, chunk)
      }
      p.send({ type: 'end', ch, exitCode: 0, timedOut: false, durationMs: 1 })
    })
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    const channel = link.openChannel()
    const events: ChannelEvent[] = []
    const ended = new Promise<void>((resolve) => {
      channel.consume((e) => {
        events.push(e)
        if (e.type === 'shell_out') channel.release(e.payload.byteLength)
        if (e.type === 'end') resolve()
      })
    })
    const credited = peer.waitCredit()
    await link.call('exec', { command: 'x', timeoutMs: 1000, ch: channel.id })
    await ended
    await credited
    expect(events.filter((e) => e.type === 'shell_out')).toHaveLength(16)
    expect(events.at(-1)?.type).toBe('end')
    expect(peer.credit).toBeGreaterThan(0)
    expect(channel.done).toBe(true)
    link.close()
  })

  it('fails pending calls and open channels with CONNECTION_LOST when the agent goes away', async () => {
    await using peer = await PeerAgent.start((p) => p.socket?.destroy())
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    const channel = link.openChannel()
    const terminal = new Promise<ChannelEvent>((resolve) => channel.consume(resolve))
    await expect(link.call('agent.info', {})).rejects.toMatchObject({ code: 'CONNECTION_LOST' })
    await expect(terminal).resolves.toMatchObject({ type: 'error', error: { code: 'CONNECTION_LOST' } })
    expect(link.open).toBe(false)
  })

  it('closes a channel whose agent overruns its credit window, and keeps the link serving', async () => {
    const chunk = new Uint8Array(LIMITS.maxDataChunkBytes).fill(1)
    const overrun = Math.ceil((LIMITS.channelWindowBytes + 2 * LIMITS.maxDataChunkBytes) / chunk.byteLength)
    await using peer = await PeerAgent.start((p, f) => {
      if (f.type !== 'call') return
      const ch = (f.params as { ch?: number }).ch
      p.send({ type: 'result', id: f.id, result: {} })
      if (ch === undefined) return
      for (let i = 0; i < overrun; i++)
        p.send({ type: 'shell_out', ch, id: null, offset: i * chunk.byteLength }, chunk)
    })
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    const channel = link.openChannel()
    const terminal = new Promise<ChannelEvent>((resolve) =>
      channel.consume((e) => {
        if (e.type === 'error') resolve(e)
      }),
    )
    await link.call('exec', { command: 'x', timeoutMs: 1000, ch: channel.id })
    await expect(terminal).resolves.toMatchObject({ type: 'error', error: { code: 'INVALID_FRAME' } })
    expect(channel.done).toBe(true)
    await expect(link.call('session.delete', { sessionId: 's' })).resolves.toEqual({})
    expect(link.open).toBe(true)
    link.close()
  })

  it('ignores frames for channels it never opened', async () => {
    await using peer = await PeerAgent.start((p, f) => {
      if (f.type !== 'call') return
      p.send({ type: 'shell_out', ch: 4242, id: 'r', offset: 0 }, new Uint8Array(10))
      p.send({ type: 'shell_exit', ch: 4242, id: 'r', code: 0, timedOut: false, durationMs: 1, offset: 10 })
      p.send({ type: 'end', ch: 2 ** 31, exitCode: 0, timedOut: false, durationMs: 1 })
      p.send({ type: 'error', ch: 7, error: { code: 'INTERNAL', message: 'x' } })
      p.send({ type: 'result', id: f.id, result: {} })
    })
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    await expect(link.call('session.delete', { sessionId: 's' })).resolves.toEqual({})
    expect(link.open).toBe(true)
    link.close()
  })

  it('drops hostile run frames on an open channel and delivers only the valid ones, unknown fields stripped', async () => {
    await using peer = await PeerAgent.start((p, f) => {
      if (f.type !== 'call') return
      const ch = (f.params as { ch?: number }).ch
      if (ch === undefined) {
        p.send({ type: 'result', id: f.id, result: {} })
        return
      }
      const exit = { type: 'shell_exit', ch, id: 'r', code: 0, timedOut: false, durationMs: 1, offset: 0 }
      p.send({ type: 'shell_start', ch, id: 'x'.repeat(129), offset: 0 })
      p.send({ type: 'shell_start', ch, id: 'r', offset: -1 })
      p.send({ ...exit, code: 256 })
      p.send({ ...exit, code: '0' })
      p.send({ ...exit, timedOut: 'no' })
      p.send({ ...exit, oomKilled: 1 })
      p.send({ ...exit, ch: ch + 1 })
      p.send({ type: 'result', id: 'x', result: {} })
      p.send({ type: 'shell_start', ch, id: 'r', offset: 0, command: 'rm -rf /' })
      p.send({ ...exit, sessionId: 'other' })
      p.send({ type: 'result', id: f.id, result: {}, extra: 1 })
    })
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    const channel = link.openChannel()
    const events: ChannelEvent[] = []
    const exited = new Promise<void>((resolve) =>
      channel.consume((e) => {
        events.push(e)
        if (e.type === 'shell_exit') resolve()
      }),
    )
    await link.call('exec', { command: 'x', timeoutMs: 1000, ch: channel.id })
    await exited
    expect(events).toEqual([
      { type: 'shell_start', ch: channel.id, id: 'r', offset: 0 },
      { type: 'shell_exit', ch: channel.id, id: 'r', code: 0, timedOut: false, durationMs: 1, offset: 0 },
    ])
    await expect(link.call('session.delete', { sessionId: 's' })).resolves.toEqual({})
    expect(link.open).toBe(true)
    link.close()
  })

  it('answers agent pings with pongs', async () => {
    let pong: (f: Record<string, unknown>) => void = () => {}
    const ponged = new Promise<Record<string, unknown>>((resolve) => {
      pong = resolve
    })
    await using peer = await PeerAgent.start((_p, f) => {
      if (f.type === 'pong') pong(f)
    })
    const link = await AgentLink.open(await peer.connect(), { logger, secret: SECRET })
    peer.send({ type: 'ping', n: 7 })
    await expect(ponged).resolves.toEqual({ type: 'pong', n: 7 })
    link.close()
  })
})
