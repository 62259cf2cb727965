// Attacks on the pooled read buffers (read-buffer-pool.ts): bash's pipe reads land in buffers
// that are read into again once nothing holds them. A buffer reused too early would rewrite
// bytes still held by the scrollback, a stalled channel's queue or an unwritten frame; each test
// floods position-dependent bytes (counting lines) through many times the pool and checks every
// byte that comes back, from the log and live.
import { LIMITS } from '@conch/protocol/zod-free'
import { describe, expect, vi } from 'vitest'
import { type AgentClient, type OutputFrame, outputFrames } from './agent-client.ts'
import { servedAgentTest } from './served-agent.ts'

const test = servedAgentTest({ killGraceMs: 300 })

/** About 20.9 MB of counting lines: two and a half times the default scrollback. */
const LINES = 3_000_000
const FLOOD = Buffer.from(Array.from({ length: LINES }, (_, i) => `${i + 1}\n`).join(''))

/** Grants credit for each output frame of the channels in `chs` as it arrives. */
function grantAsReceived(c: AgentClient, chs: number[]): void {
  c.onFrame = (f) => {
    const frame = f as unknown as OutputFrame
    if ((frame.type === 'shell_out' || frame.type === 'shell_err') && chs.includes(frame.ch ?? -1))
      c.send({ type: 'credit', ch: frame.ch, bytes: frame.payload.byteLength })
    return true
  }
}

/** The bytes of `frames`, checked to cover `[from, ...)` with no gap or overlap. */
function joined(frames: OutputFrame[], from: number): Buffer {
  let at = from
  for (const f of frames) {
    expect(f.offset).toBe(at)
    at += f.payload.byteLength
  }
  return Buffer.concat(frames.map((f) => f.payload))
}

/** The earliest offset the session's scrollback still holds (an attach from 0 is refused). */
async function earliestOffset(c: AgentClient): Promise<number> {
  const err = await c.call('session.attach', { sessionId: 'default', ch: 99, offset: 0 }).then(
    () => null,
    (e: { code?: string; details?: { earliestOffset?: number } }) => e,
  )
  expect(err?.code).toBe('OUTPUT_LOST')
  return err?.details?.earliestOffset as number
}

describe('pooled pipe reads under a flood', () => {
  test('a flood nobody reads leaves the bounded scrollback byte-exact', async ({ agent }) => {
    const c = await agent.connect()
    await c.call('session.run', {
      sessionId: 'default',
      id: 'flood',
      command: `seq 1 ${LINES}`,
      buffer: false,
    })
    await c.call('session.run', { sessionId: 'default', id: 'after', command: 'true', buffer: true })
    const from = await earliestOffset(c)
    grantAsReceived(c, [1])
    await c.call('session.attach', { sessionId: 'default', ch: 1, offset: from })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 1)
    const replay = joined(outputFrames(c, 1), from)
    expect(from + replay.length).toBe(FLOOD.length)
    expect(replay.equals(FLOOD.subarray(from))).toBe(true)
    // Within the scrollback bound, and a record keeps at most twice its bytes: at least half kept.
    expect(replay.length).toBeLessThanOrEqual(LIMITS.scrollbackBytes)
    expect(replay.length).toBeGreaterThanOrEqual(LIMITS.scrollbackBytes / 2)
  })

  test('a live flood reaches a channel with credit byte-exact', async ({ agent }) => {
    const c = await agent.connect()
    grantAsReceived(c, [2])
    await c.call('session.attach', { sessionId: 'default', ch: 2 })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 2)
    await c.call('session.run', {
      sessionId: 'default',
      id: 'flood',
      command: `seq 1 ${LINES}`,
      buffer: false,
    })
    await c.waitFor((f) => f.type === 'shell_exit' && f.id === 'flood')
    expect(joined(outputFrames(c, 2), 0).equals(FLOOD)).toBe(true)
  })

  test('a sandbox flooding while the client reads nothing: the stalled and a second channel stay byte-exact', async ({
    agent,
  }) => {
    const c = await agent.connect()
    // No credit on channel 3: the flood stalls with its records queued and in the log.
    await c.call('session.attach', { sessionId: 'default', ch: 3 })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 3)
    const running = c.call('session.run', {
      sessionId: 'default',
      id: 'flood',
      command: `seq 1 ${LINES}`,
      buffer: false,
    })
    const received = (): number => outputFrames(c, 3).reduce((n, f) => n + f.payload.byteLength, 0)
    await vi.waitFor(() => expect(received()).toBeGreaterThanOrEqual(LIMITS.channelWindowBytes), {
      timeout: 10_000,
    })
    for (let i = 0; i < 3; i++) {
      await c.call('session.list', {})
      expect(received()).toBeLessThanOrEqual(LIMITS.channelWindowBytes + LIMITS.maxDataChunkBytes)
    }
    // A second client-side channel replays what the log holds meanwhile.
    grantAsReceived(c, [4])
    await c.call('session.attach', { sessionId: 'default', ch: 4, offset: 0 })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 4)
    const replay = joined(outputFrames(c, 4), 0)
    expect(replay.equals(FLOOD.subarray(0, replay.length))).toBe(true)
    // The stalled channel gets credit at last: the whole flood arrives on it, byte-exact.
    grantAsReceived(c, [3, 4])
    c.send({ type: 'credit', ch: 3, bytes: received() })
    await running
    // Each channel has all of the run's output once its own exit arrived (they finish apart).
    for (const ch of [3, 4])
      await c.waitFor((f) => f.type === 'shell_exit' && f.id === 'flood' && f.ch === ch)
    expect(joined(outputFrames(c, 3), 0).equals(FLOOD)).toBe(true)
    expect(joined(outputFrames(c, 4), 0).equals(FLOOD)).toBe(true)
  })

  test('markers split across reads near the copy and buffer sizes are found and never shown', async ({
    agent,
  }) => {
    const c = await agent.connect()
    // Outputs ending a few bytes short of 32 KiB and 64 KiB put the end marker across two reads.
    for (const size of [32 * 1024, 64 * 1024]) {
      for (let short = 0; short <= 48; short += 6) {
        const n = size - short
        const result = await c.call<{ stdout: string; stderr: string; exitCode: number }>('session.run', {
          sessionId: 'default',
          id: `m${n}`,
          command: `head -c ${n} /dev/zero | tr '\\0' a; head -c ${n} /dev/zero | tr '\\0' b >&2`,
          buffer: true,
        })
        expect(result.exitCode).toBe(0)
        expect(Buffer.from(result.stdout, 'base64').equals(Buffer.alloc(n, 'a'))).toBe(true)
        expect(Buffer.from(result.stderr, 'base64').equals(Buffer.alloc(n, 'b'))).toBe(true)
      }
    }
  })
})

// With a scrollback of two reads, the log lets go of a record almost at once: only a channel's
// queue and the link's unwritten frames keep its buffer from being read into again.
const tiny = servedAgentTest({ killGraceMs: 300, scrollbackBytes: 2 * 64 * 1024 })

describe('pooled pipe reads when the log evicts at once', () => {
  tiny('a live flood through a slow link reaches the channel byte-exact', async ({ agent }) => {
    const c = await agent.connect()
    // Credit is granted a few frames late, so frames and queued records wait while reads go on.
    const late: OutputFrame[] = []
    c.onFrame = (f) => {
      const frame = f as unknown as OutputFrame
      if ((frame.type === 'shell_out' || frame.type === 'shell_err') && frame.ch === 5) {
        late.push(frame)
        if (late.length > 3) {
          const due = late.shift()!
          setTimeout(() => c.send({ type: 'credit', ch: 5, bytes: due.payload.byteLength }), 1)
        }
      } else if (frame.type === 'shell_exit' && frame.ch === 5) {
        for (const due of late.splice(0)) c.send({ type: 'credit', ch: 5, bytes: due.payload.byteLength })
      }
      return true
    }
    await c.call('session.attach', { sessionId: 'default', ch: 5 })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 5)
    const from = (c.frames.find((f) => f.type === 'scrollback_end' && f.ch === 5) as { offset?: number })
      .offset!
    await c.call('session.run', {
      sessionId: 'default',
      id: 'flood',
      command: `seq 1 ${LINES}`,
      buffer: false,
    })
    await c.waitFor((f) => f.type === 'shell_exit' && f.id === 'flood' && f.ch === 5)
    expect(joined(outputFrames(c, 5), from).equals(FLOOD)).toBe(true)
  })
})
