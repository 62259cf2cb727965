// The channel's contract, written once and run for both roles (the runner's end: HostFrame out,
// AgentFrame in; the agent's end: the reverse) over a real Unix socket, each end configured as
// its role configures it. The peer is the other role's end, or a raw socket writing what a
// hostile peer would (the agent shares its sandbox with user code, who reads this source).
import type { Socket } from 'node:net'
import {
  AGENT_FRAME_TYPES,
  AgentFrame,
  type HostFrame,
  LIMITS,
  parseFrame,
  type WireError,
} from '@conch/protocol'
import { parseHostFrame } from '@conch/protocol/zod-free'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { encodeFrame, FrameDecoder, type Payload } from '../src/frame-codec.ts'
import {
  type CreditFrame,
  LinkChannel,
  type LinkChannelOptions,
  OVERRUN_ERROR,
  type WithoutChannel,
} from '../src/link-channel.ts'
import { type FrameParser, LinkEndpoint, type LinkFrame } from '../src/link-endpoint.ts'
import { type SocketPair, socketPair } from './socket-pair.ts'

const CHUNK = 16_384
const WINDOW = 16 * CHUNK

/** What a channel's end needs from its link, in the tests. */
interface ChannelConfig<Out extends LinkFrame> {
  id: number
  send: (frame: Out | CreditFrame, payload?: Payload) => boolean
  sendWindow: number | null
  receiveWindow: number | null
  overruns: number[]
}

interface Role<Out extends LinkFrame, In extends LinkFrame> {
  name: string
  /** This role's parser of what the peer sends: zod's on the runner, the zod-free one on the agent. */
  parse: FrameParser<In>
  /** A frame with a payload this role sends on a channel. */
  payloadFrame: (offset: number) => WithoutChannel<Out>
  /** The frame that ends this role's sending (the agent's terminal `end`, the runner's upload `end`). */
  endFrame: WithoutChannel<Out>
  /** Ends this role's sending on `channel` with `endFrame`. */
  finish: (channel: LinkChannel<Out, In>) => void
  /** A payload frame the peer sends on channel `ch`, as raw JSON. */
  peerPayload: (ch: number, offset: number) => Record<string, unknown>
  /** The frame type this role sends when it cuts a channel off. */
  abortType: string
  /** The role's channel options (as `runner-channel.ts` and `agent-channel.ts` configure them). */
  options: (config: ChannelConfig<Out>) => LinkChannelOptions<Out, In>
}

const runner: Role<HostFrame, AgentFrame> = {
  name: 'runner',
  parse: (header) => parseFrame(AgentFrame, header, 'type', AGENT_FRAME_TYPES),
  payloadFrame: () => ({ type: 'data' }),
  endFrame: { type: 'end' },
  finish: (channel) => channel.send({ type: 'end' }),
  peerPayload: (ch, offset) => ({ type: 'shell_out', ch, id: null, offset }),
  abortType: 'close',
  options: (c) => ({
    ...c,
    isTerminal: (f) => f.type === 'shell_closed' || f.type === 'end' || f.type === 'error',
    abortFrame: () => ({ type: 'close' }),
    failure: (error) => ({ type: 'error', error }),
    onOverrun: (bytes) => c.overruns.push(bytes),
  }),
}

const agent: Role<AgentFrame, HostFrame> = {
  name: 'agent',
  parse: parseHostFrame,
  payloadFrame: (offset) => ({ type: 'data', offset }),
  endFrame: { type: 'end', exitCode: 0, timedOut: false, durationMs: 0 },
  finish: (channel) => channel.end({ type: 'end', exitCode: 0, timedOut: false, durationMs: 0 }),
  peerPayload: (ch) => ({ type: 'data', ch }),
  abortType: 'error',
  options: (c) => ({
    ...c,
    isTerminal: (f) => f.type === 'close',
    abortFrame: (error) => (error === null ? null : { type: 'error', error }),
    onOverrun: (bytes) => c.overruns.push(bytes),
  }),
}

/** What a channel's consumer saw. */
interface Seen<In> {
  frames: In[]
  bytes: Buffer[]
  closed: number
}

/** One end of a link with its channels, routed as the roles route them. */
class End<Out extends LinkFrame, In extends LinkFrame> {
  readonly endpoint: LinkEndpoint<Out, In>
  readonly channels = new Map<number, LinkChannel<Out, In>>()
  readonly overruns: number[] = []
  readonly #role: Role<Out, In>
  readonly #windows: { send: number | null; receive: number | null }

  constructor(
    socket: Socket,
    role: Role<Out, In>,
    windows: { send: number | null; receive: number | null } = { send: WINDOW, receive: WINDOW },
  ) {
    this.#role = role
    this.#windows = { send: windows.send, receive: windows.receive }
    this.endpoint = new LinkEndpoint<Out, In>(socket, {
      parse: role.parse,
      onFrame: (frame, payload) => {
        const ch = (frame as { ch?: number }).ch
        if (ch !== undefined) this.channels.get(ch)?.deliver(frame, Buffer.from(payload))
      },
      onBadFrame: () => {},
      onDrain: () => {
        for (const channel of this.channels.values()) channel.drained()
      },
      onClose: () => {
        const error: WireError = { code: 'CONNECTION_LOST', message: 'the link closed' }
        for (const channel of [...this.channels.values()]) channel.lost(error)
      },
    })
  }

  /** Opens channel `id` and records what its consumer sees; `release` returns credit at once. */
  open(id: number, release = false): { channel: LinkChannel<Out, In>; seen: Seen<In> } {
    const channel = new LinkChannel<Out, In>(
      this.#role.options({
        id,
        send: (frame, payload) => this.endpoint.send(frame as Out, payload),
        sendWindow: this.#windows.send,
        receiveWindow: this.#windows.receive,
        overruns: this.overruns,
      }),
    )
    this.channels.set(id, channel)
    const seen: Seen<In> = { frames: [], bytes: [], closed: 0 }
    channel.consume((frame, payload) => {
      seen.frames.push(frame)
      if (payload.byteLength > 0) {
        seen.bytes.push(Buffer.from(payload))
        if (release) channel.release(payload.byteLength)
      }
    })
    channel.onClose(() => {
      seen.closed += 1
    })
    return { channel, seen }
  }
}

/** Frames a raw peer socket receives, decoded but not parsed. */
function rawFrames(socket: Socket): Record<string, unknown>[] {
  const got: Record<string, unknown>[] = []
  const decoder = new FrameDecoder()
  socket.on('data', (chunk: Buffer) => {
    for (const r of decoder.push(chunk)) if (r.ok) got.push(r.frame.header as Record<string, unknown>)
  })
  return got
}

function pattern(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n)
  for (let i = 0; i < n; i++) out[i] = (i * 7 + seed * 13) & 0xff
  return out
}

const total = (bytes: Buffer[]): number => bytes.reduce((n, b) => n + b.length, 0)

let pair: SocketPair | undefined
afterEach(() => {
  pair?.close()
  pair = undefined
})

function runRole<Out extends LinkFrame, In extends LinkFrame>(
  role: Role<Out, In>,
  peerRole: Role<In, Out>,
): void {
  describe(`a channel at the ${role.name}'s end`, () => {
    async function connected(windows?: { send: number | null; receive: number | null }) {
      pair = await socketPair()
      return { self: new End(pair.a, role, windows), peer: new End(pair.b, peerRole, windows), pair }
    }

    it('pauses its sender once the credit is used up, and resumes when the peer returns credit', async () => {
      const { self, peer } = await connected()
      const mine = self.open(1)
      const theirs = peer.open(1)
      const data = pattern(3 * WINDOW, 1)
      let chunks = 0
      for (let at = 0; at < WINDOW; at += CHUNK) {
        const more = mine.channel.sendPayload(role.payloadFrame(at), data.subarray(at, at + CHUNK))
        chunks += 1
        expect(more).toBe(chunks < WINDOW / CHUNK)
      }
      expect(mine.channel.credit).toBe(0)
      let resumed = 0
      mine.channel.onResume(() => {
        resumed += 1
      })
      // A writer that waits for credit: it cannot send until the peer releases.
      let written = false
      const writing = (async () => {
        for (let at = WINDOW; at < data.length; at += CHUNK)
          expect(await mine.channel.write(role.payloadFrame(at), data.subarray(at, at + CHUNK))).toBe(true)
        written = true
      })()
      await vi.waitFor(() => expect(total(theirs.seen.bytes)).toBe(WINDOW))
      expect(theirs.channel.inFlight).toBe(WINDOW)
      expect(written).toBe(false)
      expect(total(theirs.seen.bytes)).toBe(WINDOW)
      // The peer hands the bytes on: credit flows back and the writer goes on, window by window.
      const releaseAll = (): void => {
        const owed = theirs.channel.inFlight
        theirs.channel.release(owed)
        theirs.channel.flushCredit()
      }
      releaseAll()
      await vi.waitFor(() => expect(total(theirs.seen.bytes)).toBe(2 * WINDOW))
      expect(resumed).toBeGreaterThan(0)
      releaseAll()
      await writing
      await vi.waitFor(() => expect(total(theirs.seen.bytes)).toBe(data.length))
      expect(Buffer.concat(theirs.seen.bytes).equals(data)).toBe(true)
      expect(self.overruns).toEqual([])
      expect(peer.overruns).toEqual([])
    })

    it('sends a payload given in pieces as one frame, the pieces back to back, counted against credit', async () => {
      const { self, peer, pair } = await connected()
      const mine = self.open(9)
      const theirs = peer.open(9)
      const frames = rawFrames(pair.b)
      const pieces = [pattern(CHUNK, 5), Buffer.alloc(0), pattern(3, 6), pattern(CHUNK - 3, 7)]
      expect(mine.channel.sendPayload(role.payloadFrame(0), pieces)).toBe(true)
      expect(mine.channel.credit).toBe(WINDOW - 2 * CHUNK)
      await vi.waitFor(() => expect(theirs.seen.frames).toHaveLength(1))
      expect(theirs.seen.bytes).toHaveLength(1)
      expect(theirs.seen.bytes[0]!.equals(Buffer.concat(pieces))).toBe(true)
      expect(frames).toHaveLength(1)
    })

    it('takes a peer up to its window plus one chunk, and cuts off one byte more, keeping the link', async () => {
      const { self, pair } = await connected()
      const victim = self.open(7)
      const other = self.open(8, true)
      const got = rawFrames(pair.b)
      const limit = WINDOW + LIMITS.maxDataChunkBytes
      let offset = 0
      for (; offset + CHUNK <= limit; offset += CHUNK)
        pair.b.write(encodeFrame(role.peerPayload(7, offset), pattern(CHUNK, 2)))
      await vi.waitFor(() => expect(total(victim.seen.bytes)).toBe(limit))
      expect(victim.channel.done).toBe(false)
      // The attack: one byte beyond the window the peer was given.
      pair.b.write(encodeFrame(role.peerPayload(7, offset), Buffer.from([1])))
      await vi.waitFor(() => expect(victim.channel.done).toBe(true))
      expect(self.overruns).toEqual([limit + 1])
      expect(victim.seen.closed).toBe(1)
      // The attacker hears that the channel is gone, with the reason when the role sends one.
      await vi.waitFor(() => expect(got.map((f) => f.type)).toEqual([role.abortType]))
      expect(got[0]).toMatchObject({ ch: 7 })
      if (role.abortType === 'error') expect(got[0]?.error).toEqual(OVERRUN_ERROR)
      // The consumer learns why, when the role hands it failures (the runner's does).
      const last = victim.seen.frames.at(-1) as { type: string; error?: WireError }
      if (last.type === 'error') expect(last.error).toEqual(OVERRUN_ERROR)
      // What the attacker sends on the cut channel is dropped; other channels go on.
      const seenBefore = victim.seen.frames.length
      pair.b.write(encodeFrame(role.peerPayload(7, offset + 1), Buffer.alloc(10)))
      pair.b.write(encodeFrame(role.peerPayload(8, 0), Buffer.from('still here')))
      await vi.waitFor(() => expect(Buffer.concat(other.seen.bytes).toString()).toBe('still here'))
      expect(victim.seen.frames).toHaveLength(seenBefore)
      expect(self.endpoint.open).toBe(true)
    })

    it('closing at this end ends the channel at both ends and stops everything after', async () => {
      const { self, peer } = await connected()
      const mine = self.open(3)
      const theirs = peer.open(3, true)
      expect(mine.channel.sendPayload(role.payloadFrame(0), Buffer.from('before'))).toBe(true)
      mine.channel.close({ code: 'INTERNAL', message: 'giving up' })
      expect(mine.channel.done).toBe(true)
      expect(mine.seen.closed).toBe(1)
      expect(mine.channel.sendPayload(role.payloadFrame(6), Buffer.from('after'))).toBe(false)
      await vi.waitFor(() => expect(theirs.channel.done).toBe(true))
      expect(Buffer.concat(theirs.seen.bytes).toString()).toBe('before')
      expect(theirs.seen.closed).toBe(1)
      // Whatever the peer still sends is dropped here.
      const seenBefore = mine.seen.frames.length
      peer.endpoint.send({ ...peerRole.payloadFrame(0), ch: 3 } as unknown as In, Buffer.from('late'))
      const probe = self.open(4)
      peer.open(4).channel.sendPayload(peerRole.payloadFrame(0), Buffer.from('probe'))
      await vi.waitFor(() => expect(Buffer.concat(probe.seen.bytes).toString()).toBe('probe'))
      expect(mine.seen.frames).toHaveLength(seenBefore)
    })

    it('ends when the peer closes, releasing a writer that waits for credit', async () => {
      const { self, peer } = await connected()
      const mine = self.open(5)
      const theirs = peer.open(5)
      for (let at = 0; at < WINDOW; at += CHUNK)
        mine.channel.sendPayload(role.payloadFrame(at), pattern(CHUNK, 3))
      const waiting = mine.channel.write(role.payloadFrame(WINDOW), pattern(CHUNK, 3))
      await vi.waitFor(() => expect(total(theirs.seen.bytes)).toBe(WINDOW))
      theirs.channel.close({ code: 'INTERNAL', message: 'peer gives up' })
      expect(await waiting).toBe(false)
      expect(mine.channel.done).toBe(true)
      expect(mine.seen.closed).toBe(1)
      expect(total(theirs.seen.bytes)).toBe(WINDOW)
    })

    it('fails every channel once when the peer dies mid-stream', async () => {
      const { self, pair } = await connected()
      const a = self.open(10)
      const b = self.open(11)
      for (let at = 0; at < WINDOW; at += CHUNK)
        a.channel.sendPayload(role.payloadFrame(at), pattern(CHUNK, 4))
      const waiting = a.channel.write(role.payloadFrame(WINDOW), pattern(CHUNK, 4))
      pair.b.write(encodeFrame(role.peerPayload(11, 0), Buffer.from('partial')))
      await vi.waitFor(() => expect(b.seen.bytes).toHaveLength(1))
      pair.b.destroy()
      expect(await waiting).toBe(false)
      await vi.waitFor(() => expect(b.channel.done).toBe(true))
      for (const { channel, seen } of [a, b]) {
        expect(channel.done).toBe(true)
        expect(seen.closed).toBe(1)
        const last = seen.frames.at(-1) as { type: string; error?: WireError } | undefined
        if (last?.type === 'error') expect(last.error?.code).toBe('CONNECTION_LOST')
        expect(channel.sendPayload(role.payloadFrame(0), Buffer.from('x'))).toBe(false)
      }
    })

    it('keeps many interleaved channels apart, each byte-exact and in order under credit', async () => {
      const { self, peer } = await connected({ send: 4 * CHUNK, receive: 4 * CHUNK })
      const count = 24
      const sizes = Array.from({ length: count }, (_, i) => 3 * CHUNK + i * 1013)
      const ends = Array.from({ length: count }, (_, i) => ({
        mine: self.open(100 + i),
        theirs: peer.open(100 + i, true),
      }))
      await Promise.all(
        ends.map(async ({ mine }, i) => {
          const data = pattern(sizes[i]!, i)
          for (let at = 0; at < data.length; at += 4096)
            expect(await mine.channel.write(role.payloadFrame(at), data.subarray(at, at + 4096))).toBe(true)
          role.finish(mine.channel)
        }),
      )
      await vi.waitFor(() =>
        expect(ends.every(({ theirs }) => theirs.seen.frames.at(-1)?.type === 'end')).toBe(true),
      )
      ends.forEach(({ theirs }, i) => {
        expect(Buffer.concat(theirs.seen.bytes).equals(pattern(sizes[i]!, i))).toBe(true)
      })
      expect(self.overruns).toEqual([])
      expect(peer.overruns).toEqual([])
    })
  })
}

runRole(runner, agent)
runRole(agent, runner)

describe('a direction without a window', () => {
  it('is held back by the link only, and a peer that returns credit anyway changes nothing', async () => {
    pair = await socketPair()
    const self = new End(pair.a, runner, { send: null, receive: WINDOW })
    const peer = new End(pair.b, agent, { send: WINDOW, receive: null })
    const mine = self.open(1)
    const theirs = peer.open(1)
    const data = pattern(2 * WINDOW, 5)
    for (let at = 0; at < data.length; at += CHUNK)
      expect(await mine.channel.write({ type: 'data' }, data.subarray(at, at + CHUNK))).toBe(true)
    await vi.waitFor(() => expect(total(theirs.seen.bytes)).toBe(data.length))
    expect(theirs.channel.done).toBe(false)
    theirs.channel.release(data.length)
    expect(mine.channel.credit).toBe(Number.POSITIVE_INFINITY)
  })
})

describe('a direction put under credit once open (limitSends)', () => {
  it('waits for the credit the peer returns from then on, and gets all its bytes through in order', async () => {
    pair = await socketPair()
    const self = new End(pair.a, runner, { send: null, receive: WINDOW })
    const peer = new End(pair.b, agent, { send: WINDOW, receive: null })
    const mine = self.open(1)
    const theirs = peer.open(1)
    mine.channel.limitSends(2 * CHUNK)
    const data = pattern(8 * CHUNK, 6)
    const writes = Array.from({ length: 8 }, (_, i) =>
      mine.channel.write({ type: 'data' }, data.subarray(i * CHUNK, (i + 1) * CHUNK)),
    )
    // Two chunks use the window up; nothing more leaves before the peer returns credit.
    await vi.waitFor(() => expect(total(theirs.seen.bytes)).toBe(2 * CHUNK))
    await new Promise((resolve) => setImmediate(resolve))
    expect(total(theirs.seen.bytes)).toBe(2 * CHUNK)
    expect(mine.channel.credit).toBe(0)
    // The agent's end batches credit by a quarter of its receive window (the default window).
    let released = 0
    while (released < data.length) {
      await vi.waitFor(() => expect(total(theirs.seen.bytes)).toBeGreaterThan(released))
      const got = total(theirs.seen.bytes)
      theirs.channel.release(got - released)
      theirs.channel.flushCredit()
      released = got
    }
    expect(await Promise.all(writes)).toEqual(Array(8).fill(true))
    expect(Buffer.concat(theirs.seen.bytes).equals(data)).toBe(true)
    await vi.waitFor(() => expect(mine.channel.credit).toBe(2 * CHUNK))
    // A second call changes nothing: the window is set once.
    mine.channel.limitSends(1)
    expect(mine.channel.credit).toBe(2 * CHUNK)
  })
})
