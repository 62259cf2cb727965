// The endpoint's contract, written once and run for both roles (the runner's end: HostFrame
// out, AgentFrame in; the agent's end: the reverse) over a real Unix socket. The peer is either
// the other role's endpoint or a raw socket writing hostile bytes.
import type { Socket } from 'node:net'
import { Duplex } from 'node:stream'
import { AGENT_FRAME_TYPES, AgentFrame, type HostFrame, parseFrame, type WireError } from '@conch/protocol'
import { parseHostFrame } from '@conch/protocol/zod-free'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { encodeFrame, FrameDecoder } from '../src/frame-codec.ts'
import { type FrameParser, LAZY_FLUSH_MS, LinkEndpoint, type LinkFrame } from '../src/link-endpoint.ts'
import { type SocketPair, socketPair } from './socket-pair.ts'

interface Role<Out extends LinkFrame, In extends LinkFrame> {
  name: string
  /** The peer's parser: of what this role sends. */
  out: FrameParser<Out>
  /** This role's parser: of what the peer sends. */
  in: FrameParser<In>
  /** A frame of this role that carries a payload. */
  payloadFrame: Out
  /** A frame of this role without one. */
  controlFrame: (n: number) => Out
}

/** The runner's parser (zod's); the agent's is the zod-free `parseHostFrame`, as in the roles. */
const parseAgentFrame: FrameParser<AgentFrame> = (header) =>
  parseFrame(AgentFrame, header, 'type', AGENT_FRAME_TYPES)

const runner: Role<HostFrame, AgentFrame> = {
  name: 'runner',
  out: parseHostFrame,
  in: parseAgentFrame,
  payloadFrame: { type: 'data', ch: 3 },
  controlFrame: (n) => ({ type: 'credit', ch: 3, bytes: n + 1 }),
}

const agent: Role<AgentFrame, HostFrame> = {
  name: 'agent',
  out: parseAgentFrame,
  in: parseHostFrame,
  payloadFrame: { type: 'shell_out', ch: 3, id: 'r-1', offset: 0 },
  controlFrame: (n) => ({ type: 'shell_start', ch: 3, id: `r-${n}`, offset: n }),
}

/** What one endpoint observed. */
interface Seen<F> {
  frames: { frame: F; payload: Buffer }[]
  bad: { error: WireError; header: unknown }[]
  closed: string[]
  drains: number
}

function observe<Out extends LinkFrame, In extends LinkFrame>(
  socket: Socket,
  parse: FrameParser<In>,
  maxFrameBytes?: number,
): { endpoint: LinkEndpoint<Out, In>; seen: Seen<In> } {
  const seen: Seen<In> = { frames: [], bad: [], closed: [], drains: 0 }
  const endpoint = new LinkEndpoint<Out, In>(socket, {
    parse,
    ...(maxFrameBytes === undefined ? {} : { maxFrameBytes }),
    onFrame: (frame, payload) => seen.frames.push({ frame, payload: Buffer.from(payload) }),
    onBadFrame: (error, header) => seen.bad.push({ error, header }),
    onClose: (reason) => seen.closed.push(reason),
    onDrain: () => {
      seen.drains += 1
    },
  })
  return { endpoint, seen }
}

/** Frames a raw peer socket receives, decoded but not parsed. */
function rawFrames(socket: Socket): { header: unknown; payload: Buffer }[] {
  const got: { header: unknown; payload: Buffer }[] = []
  const decoder = new FrameDecoder()
  socket.on('data', (chunk: Buffer) => {
    for (const r of decoder.push(chunk)) {
      if (r.ok) got.push({ header: r.frame.header, payload: Buffer.from(r.frame.payload) })
    }
  })
  return got
}

let pair: SocketPair | undefined
afterEach(() => {
  pair?.close()
  pair = undefined
})

/**
 * How the end under test reads: `slab` into slabs through a socket of `connectLinkSocket` (the
 * runner's connection), `data` from the stream's data events (the agent's accepted socket).
 */
type ReadPath = 'slab' | 'data'

function runRole<Out extends LinkFrame, In extends LinkFrame>(role: Role<Out, In>, reads: ReadPath): void {
  describe(`the ${role.name}'s end, reading by ${reads}`, () => {
    async function connected(maxFrameBytes?: number) {
      pair = await socketPair({ slabReads: reads === 'slab' })
      const self = observe<Out, In>(pair.a, role.in, maxFrameBytes)
      const peer = observe<In, Out>(pair.b, role.out)
      return { self, peer, pair }
    }

    it('delivers typed frames and their payloads byte-exact and in order', async () => {
      const { self, peer } = await connected()
      const payload = Buffer.alloc(200_000)
      for (let i = 0; i < payload.length; i++) payload[i] = (i * 31) & 0xff
      self.endpoint.send(role.controlFrame(0))
      self.endpoint.send(role.payloadFrame, payload)
      for (let i = 1; i < 50; i++) self.endpoint.send(role.controlFrame(i))
      await vi.waitFor(() => expect(peer.seen.frames).toHaveLength(51))
      expect(peer.seen.frames[0]?.frame).toEqual(role.controlFrame(0))
      expect(peer.seen.frames[1]?.frame).toEqual(role.payloadFrame)
      expect(peer.seen.frames[1]?.payload.equals(payload)).toBe(true)
      expect(peer.seen.frames.slice(2).map((f) => f.frame)).toEqual(
        Array.from({ length: 49 }, (_, i) => role.controlFrame(i + 1)),
      )
      expect(peer.seen.bad).toEqual([])
    })

    it('hands pings to the role before live(), and answers them itself after', async () => {
      const { self, pair } = await connected()
      const got = rawFrames(pair.b)
      pair.b.write(encodeFrame({ type: 'ping', n: 1 }))
      await vi.waitFor(() => expect(self.seen.frames.map((f) => f.frame)).toEqual([{ type: 'ping', n: 1 }]))
      expect(got).toEqual([])
      self.endpoint.live()
      pair.b.write(encodeFrame({ type: 'ping', n: 2 }))
      await vi.waitFor(() => expect(got.map((f) => f.header)).toEqual([{ type: 'pong', n: 2 }]))
      expect(self.seen.frames).toHaveLength(1)
    })

    it('stays open while the peer answers heartbeats and closes once it stops', async () => {
      const { self, pair } = await connected()
      const decoder = new FrameDecoder()
      let answering = true
      let answered = 0
      pair.b.on('data', (chunk: Buffer) => {
        for (const r of decoder.push(chunk)) {
          const header = r.ok ? (r.frame.header as { type: string; n: number }) : undefined
          if (header?.type === 'ping' && answering) {
            answered += 1
            pair.b.write(encodeFrame({ type: 'pong', n: header.n }))
          }
        }
      })
      self.endpoint.live(10)
      await vi.waitFor(() => expect(answered).toBeGreaterThanOrEqual(5))
      expect(self.endpoint.open).toBe(true)
      answering = false
      await vi.waitFor(() => expect(self.seen.closed).toEqual(['the peer stopped answering heartbeats']))
      expect(self.endpoint.open).toBe(false)
    })

    it('reports garbage, unknown types and misspelt fields, and keeps decoding after them', async () => {
      const { self, pair } = await connected()
      const notJson = Buffer.from('{not json')
      const garbage = Buffer.alloc(8 + notJson.length)
      garbage.writeUInt32BE(4 + notJson.length, 0)
      garbage.writeUInt32BE(notJson.length, 4)
      notJson.copy(garbage, 8)
      pair.b.write(garbage)
      pair.b.write(encodeFrame({ type: 'launch_missiles', ch: 1 }))
      pair.b.write(encodeFrame({ type: 'ping', number: 1 }))
      pair.b.write(encodeFrame([1, 2, 3]))
      pair.b.write(encodeFrame(peerControl(role)))
      await vi.waitFor(() => expect(self.seen.frames).toHaveLength(1))
      expect(self.seen.bad.map((b) => b.error.code)).toEqual([
        'INVALID_FRAME',
        'UNKNOWN_FRAME_TYPE',
        'INVALID_FRAME',
        'INVALID_FRAME',
      ])
      expect(self.seen.bad[1]?.header).toEqual({ type: 'launch_missiles', ch: 1 })
      expect(self.endpoint.open).toBe(true)
    })

    it('skips an oversized frame byte-exactly without buffering it, then goes on', async () => {
      const { self, pair } = await connected(1024)
      const big = encodeFrame({ type: 'ping', n: 1 }, Buffer.alloc(100_000, 7))
      // Sent in small pieces: the skipped bytes must never be held.
      for (let at = 0; at < big.byteLength; at += 4096) pair.b.write(big.subarray(at, at + 4096))
      pair.b.write(encodeFrame({ type: 'ping', n: 2 }))
      await vi.waitFor(() => expect(self.seen.frames.map((f) => f.frame)).toEqual([{ type: 'ping', n: 2 }]))
      expect(self.seen.bad.map((b) => b.error.code)).toEqual(['FRAME_TOO_LARGE'])
    })

    it('hands a claimed length of 4 GiB to the role as oversize without waiting for the bytes', async () => {
      const { self, pair } = await connected()
      pair.b.write(Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]))
      await vi.waitFor(() => expect(self.seen.bad.map((b) => b.error.code)).toEqual(['FRAME_TOO_LARGE']))
    })

    it('closes once when the peer dies, and sends nothing after', async () => {
      const { self, pair } = await connected()
      pair.b.destroy()
      await vi.waitFor(() => expect(self.seen.closed).toEqual(['the peer closed the link']))
      expect(self.endpoint.open).toBe(false)
      expect(self.endpoint.send(role.controlFrame(1))).toBe(false)
      await expect(self.endpoint.sendWhenWritable(role.payloadFrame, Buffer.alloc(10))).rejects.toThrow()
      expect(self.seen.closed).toHaveLength(1)
    })

    it('closing one end closes the other', async () => {
      const { self, peer } = await connected()
      self.endpoint.close('done here')
      await vi.waitFor(() => expect(peer.seen.closed).toEqual(['the peer closed the link']))
      expect(self.seen.closed).toEqual(['done here'])
    })

    it('reports a full buffer when the peer stops reading, and drains when it reads again', async () => {
      const { self, peer, pair } = await connected()
      pair.b.pause()
      const chunk = Buffer.alloc(65_536, 1)
      let sent = 0
      while (self.endpoint.send(role.payloadFrame, chunk)) {
        sent += 1
        if (sent > 10_000) throw new Error('the endpoint never reported backpressure')
      }
      sent += 1
      const writable = self.endpoint.sendWhenWritable(role.payloadFrame, chunk)
      sent += 1
      let resolved = false
      void writable.then(() => {
        resolved = true
      })
      await new Promise((r) => setImmediate(r))
      expect(resolved).toBe(false)
      pair.b.resume()
      await writable
      await vi.waitFor(() => expect(peer.seen.frames).toHaveLength(sent))
      expect(self.seen.drains).toBeGreaterThan(0)
      expect(peer.seen.frames.every((f) => f.payload.equals(chunk))).toBe(true)
    })
  })
}

/** A control frame the peer of `role` may send. */
function peerControl(role: Role<LinkFrame, LinkFrame>): LinkFrame {
  return role === (runner as unknown) ? agent.controlFrame(9) : runner.controlFrame(9)
}

runRole(runner, 'slab')
runRole(runner, 'data')
runRole(agent, 'data')
runRole(agent, 'slab')

describe('typed send', () => {
  it('rejects a misspelt field at compile time', async () => {
    pair = await socketPair()
    const endpoint = new LinkEndpoint<HostFrame, AgentFrame>(pair.a, {
      parse: parseAgentFrame,
      onFrame: () => {},
      onBadFrame: () => {},
    })
    // @ts-expect-error `byte` is not a field of `credit`: the typecheck fails on it.
    expect(endpoint.send({ type: 'credit', ch: 1, byte: 5 })).toBe(true)
    // @ts-expect-error an agent frame type is not a runner frame.
    expect(endpoint.send({ type: 'shell_exit', ch: 1 })).toBe(true)
  })
})

describe('payloads read into slabs (the runner end of a real socket)', () => {
  it('attack: a payload held without release stays intact while released slabs are read into again', async () => {
    pair = await socketPair({ slabReads: true })
    const held: { payload: Uint8Array; expected: Buffer }[] = []
    let frames = 0
    let leased = 0
    new LinkEndpoint<HostFrame, AgentFrame>(pair.a, {
      parse: parseAgentFrame,
      onFrame: (frame, payload, lease) => {
        frames += 1
        if (lease) leased += 1
        const n = (frame as { offset?: number }).offset ?? 0
        // Every tenth payload is kept as a view, never released; the rest are released at once.
        if (n % 10 === 0) held.push({ payload, expected: Buffer.from(payload) })
        else lease?.release()
      },
      onBadFrame: () => {},
    })
    // The peer floods more than several slabs' worth, in writes that straddle frame bounds.
    const stream: Uint8Array[] = []
    for (let i = 0; i < 400; i++) {
      const body = Buffer.alloc(40_000 + (i % 13) * 1000, i & 0xff)
      stream.push(encodeFrame({ type: 'shell_out', ch: 1, id: 'r', offset: i }, body))
    }
    const all = Buffer.concat(stream)
    for (let at = 0; at < all.length; at += 50_000) pair.b.write(all.subarray(at, at + 50_000))
    await vi.waitFor(() => expect(frames).toBe(400), { timeout: 10_000 })
    expect(leased).toBe(400)
    expect(held).toHaveLength(40)
    for (const h of held) expect(Buffer.from(h.payload).equals(h.expected)).toBe(true)
    // Held views still read what the peer sent for them, not bytes of later frames.
    held.forEach((h, k) => {
      expect(h.payload[0]).toBe((k * 10) & 0xff)
    })
  })
})

describe('lazy frames', () => {
  /** A stream that records each write the endpoint hands the kernel, as the list of its chunks. */
  function recorder(): { stream: Duplex; writes: Buffer[][] } {
    const writes: Buffer[][] = []
    const stream = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, done) {
        writes.push([chunk])
        done()
      },
      writev(chunks, done) {
        writes.push(chunks.map((c) => c.chunk as Buffer))
        done()
      },
    })
    return { stream, writes }
  }

  /** The frames in one recorded write, decoded. */
  function framesOf(write: Buffer[]): unknown[] {
    const decoder = new FrameDecoder()
    return decoder.push(Buffer.concat(write)).map((r) => (r.ok ? r.frame.header : r.error))
  }

  function endpointOn(stream: Duplex): LinkEndpoint<AgentFrame, HostFrame> {
    return new LinkEndpoint<AgentFrame, HostFrame>(stream, {
      parse: parseHostFrame,
      onFrame: () => {},
      onBadFrame: () => {},
    })
  }

  const start: AgentFrame = { type: 'shell_start', ch: 1, id: 'r-1', offset: 0 }
  const exit: AgentFrame = {
    type: 'shell_exit',
    ch: 1,
    id: 'r-1',
    code: 0,
    timedOut: false,
    durationMs: 1,
    offset: 0,
  }
  // A turn of the event loop: a setImmediate queued now runs before any timer can fire.
  const turn = () => new Promise((r) => setImmediate(r))

  it('wait for the next frame that is not lazy and leave with it, in order, in one write', async () => {
    const { stream, writes } = recorder()
    const endpoint = endpointOn(stream)
    endpoint.send(start, undefined, true)
    endpoint.send({ type: 'result', id: 7, result: {} }, undefined, true)
    await turn()
    expect(writes).toEqual([])
    endpoint.send(exit)
    await turn()
    expect(writes).toHaveLength(1)
    expect(framesOf(writes[0]!)).toEqual([start, { type: 'result', id: 7, result: {} }, exit])
    endpoint.close()
  })

  it('leave before a frame with a payload, in the same write', async () => {
    const { stream, writes } = recorder()
    const endpoint = endpointOn(stream)
    endpoint.send(start, undefined, true)
    await turn()
    const bytes = Buffer.from('hello')
    endpoint.send({ type: 'shell_out', ch: 1, id: 'r-1', offset: 0 }, bytes)
    expect(writes).toHaveLength(1)
    expect(Buffer.concat(writes[0]!).subarray(-5).toString()).toBe('hello')
    expect(framesOf(writes[0]!)).toEqual([start, { type: 'shell_out', ch: 1, id: 'r-1', offset: 0 }])
    endpoint.close()
  })

  it('leave by themselves when no other frame follows', async () => {
    const { stream, writes } = recorder()
    const endpoint = endpointOn(stream)
    endpoint.send(start, undefined, true)
    await vi.waitFor(() => expect(writes).toHaveLength(1))
    expect(framesOf(writes[0]!)).toEqual([start])
    // The timer is re-armed for the next lazy frame.
    endpoint.send(exit, undefined, true)
    await vi.waitFor(() => expect(writes).toHaveLength(2))
    expect(framesOf(writes[1]!)).toEqual([exit])
    endpoint.close()
  })

  it('wait at most LAZY_FLUSH_MS from the first of them, however many lazy frames follow', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const { stream, writes } = recorder()
      const endpoint = endpointOn(stream)
      endpoint.send(start, undefined, true)
      vi.advanceTimersByTime(LAZY_FLUSH_MS - 1)
      endpoint.send({ type: 'result', id: 7, result: {} }, undefined, true)
      expect(writes).toEqual([])
      vi.advanceTimersByTime(1)
      expect(writes).toHaveLength(1)
      expect(framesOf(writes[0]!)).toEqual([start, { type: 'result', id: 7, result: {} }])
      endpoint.close()
    } finally {
      vi.useRealTimers()
    }
  })

  it('ride along with frames that are not lazy in the same tick, without waiting', async () => {
    const { stream, writes } = recorder()
    const endpoint = endpointOn(stream)
    endpoint.send(exit)
    endpoint.send(start, undefined, true)
    await turn()
    expect(writes).toHaveLength(1)
    expect(framesOf(writes[0]!)).toEqual([exit, start])
    endpoint.close()
  })
})
