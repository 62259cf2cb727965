// Output frames of an attached channel: records that follow each other leave as one frame of
// at most `LIMITS.maxOutputFrameBytes`, with exact offsets and bytes, never mixing streams or
// runs, and never more than the channel's window plus one data chunk beyond the runner's credit
// (the overrun every runner allows, so a frame is cut to the credit left).
import { LIMITS } from '@conch/protocol/zod-free'
import { describe, expect, vi } from 'vitest'
import { type AgentClient, type OutputFrame, outputFrames } from './agent-client.ts'
import { servedAgentTest } from './served-agent.ts'

const test = servedAgentTest({ killGraceMs: 300 })

/** Grants credit for every output frame of `ch` as it arrives, as a runner with room does. */
function grantAsReceived(c: AgentClient, ch: number): void {
  c.onFrame = (f) => {
    const frame = f as unknown as OutputFrame
    if ((frame.type === 'shell_out' || frame.type === 'shell_err') && frame.ch === ch)
      c.send({ type: 'credit', ch, bytes: frame.payload.byteLength })
    return true
  }
}

/** Checks that frames cover `[from, end)` with no gap or overlap; returns each stream's bytes. */
function contiguous(frames: OutputFrame[], from: number): { stdout: Buffer; stderr: Buffer; end: number } {
  let at = from
  const out: Buffer[] = []
  const err: Buffer[] = []
  for (const f of frames) {
    expect(f.offset).toBe(at)
    expect(f.payload.byteLength).toBeGreaterThan(0)
    expect(f.payload.byteLength).toBeLessThanOrEqual(LIMITS.maxOutputFrameBytes)
    at += f.payload.byteLength
    ;(f.type === 'shell_out' ? out : err).push(f.payload)
  }
  return { stdout: Buffer.concat(out), stderr: Buffer.concat(err), end: at }
}

/** Runs `command` as run `flood` with no channel attached, so its output is only in the log. */
async function recordFlood(c: AgentClient, command: string): Promise<void> {
  await c.call('session.run', { sessionId: 'default', id: 'flood', command, buffer: false })
  // Runs of a session run in order: once this one is done, the flood is in the log.
  await c.call('session.run', { sessionId: 'default', id: 'after', command: 'true', buffer: true })
}

describe('output frames on an attached channel', () => {
  test('replays a flood in frames of up to the output frame size, byte-exact from any offset', async ({
    agent,
  }) => {
    const c = await agent.connect()
    // 1 MiB of counting lines, recorded with no channel attached: the log holds it as pipe reads.
    await recordFlood(c, 'seq 1 200000 | head -c 1048576')
    const expected = Buffer.from(
      Array.from({ length: 200000 }, (_, i) => `${i + 1}\n`)
        .join('')
        .slice(0, 1048576),
    )
    grantAsReceived(c, 1)
    await c.call('session.attach', { sessionId: 'default', ch: 1, offset: 0 })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 1)
    const all = outputFrames(c, 1)
    const { stdout, end } = contiguous(all, 0)
    expect(stdout.length).toBe(expected.length)
    expect(stdout.equals(expected)).toBe(true)
    expect(end).toBe(1048576)
    // Records that follow each other went out together: fewer frames than 64 KiB reads.
    expect(all.length).toBeLessThanOrEqual(Math.ceil(1048576 / LIMITS.maxOutputFrameBytes) + 2)
    expect(all.every((f) => f.id === 'flood')).toBe(true)

    // From an offset inside a record, the replay starts exactly there.
    grantAsReceived(c, 2)
    await c.call('session.attach', { sessionId: 'default', ch: 2, offset: 70_001 })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 2)
    const tail = contiguous(outputFrames(c, 2), 70_001)
    expect(tail.stdout.equals(expected.subarray(70_001))).toBe(true)
  })

  test('cuts a joined frame to the credit left plus one chunk, the overrun every runner allows', async ({
    agent,
  }) => {
    const c = await agent.connect()
    await recordFlood(c, 'head -c 3000000 /dev/zero')
    // The replay is one contiguous run of records: joined frames, sent under credit only.
    await c.call('session.attach', { sessionId: 'default', ch: 5, offset: 0 })
    const received = (): number => outputFrames(c, 5).reduce((n, f) => n + f.payload.byteLength, 0)
    const bound = (granted: number): number => LIMITS.channelWindowBytes + granted + LIMITS.maxDataChunkBytes
    await vi.waitFor(() => expect(received()).toBeGreaterThanOrEqual(LIMITS.channelWindowBytes))
    await c.call('session.list', {})
    expect(received()).toBeLessThanOrEqual(bound(0))
    // A little credit: the next frame may not take a whole output frame's worth.
    c.send({ type: 'credit', ch: 5, bytes: 100_000 })
    const before = outputFrames(c, 5).length
    await vi.waitFor(() => expect(outputFrames(c, 5).length).toBeGreaterThan(before))
    for (let i = 0; i < 3; i++) {
      await c.call('session.list', {})
      expect(received()).toBeLessThanOrEqual(bound(100_000))
    }
    // With credit as it is used, the rest arrives, byte-exact.
    grantAsReceived(c, 5)
    c.send({ type: 'credit', ch: 5, bytes: received() })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 5)
    const { stdout } = contiguous(outputFrames(c, 5), 0)
    expect(stdout.equals(Buffer.alloc(3000000))).toBe(true)
  })

  test('keeps stdout and stderr and runs apart, with exact session offsets, while live', async ({
    agent,
  }) => {
    const c = await agent.connect()
    grantAsReceived(c, 3)
    await c.call('session.attach', { sessionId: 'default', ch: 3 })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 3)
    const start = (c.frames.find((f) => f.type === 'scrollback_end' && f.ch === 3) as { offset?: number })
      .offset as number
    for (const id of ['a', 'b']) {
      await c.call('session.run', {
        sessionId: 'default',
        id,
        command:
          'for i in 1 2 3 4 5 6; do head -c 300000 /dev/zero; head -c 70000 /dev/zero | tr "\\0" e >&2; done',
        buffer: false,
      })
    }
    await c.waitFor((f) => f.type === 'shell_exit' && f.id === 'b')
    const frames = outputFrames(c, 3)
    const { stdout, stderr, end } = contiguous(frames, start)
    expect(stdout.equals(Buffer.alloc(2 * 6 * 300000))).toBe(true)
    expect(stderr.equals(Buffer.alloc(2 * 6 * 70000, 'e'))).toBe(true)
    expect(end - start).toBe(2 * 6 * 370000)
    // Every frame belongs to one run: run a's bytes all come before run b's.
    const ids = frames.map((f) => f.id)
    expect(ids.lastIndexOf('a')).toBeLessThan(ids.indexOf('b'))
    // The exits sit after each run's last byte.
    const exitA = c.frames.find((f) => f.type === 'shell_exit' && f.id === 'a') as { offset?: number }
    expect(exitA.offset).toBe(start + 6 * 370000)
  })

  test('sends a burst of live output while its run still runs: a frame waits for its turn, not for the run', async ({
    agent,
  }) => {
    const c = await agent.connect()
    grantAsReceived(c, 6)
    await c.call('session.attach', { sessionId: 'default', ch: 6 })
    await c.waitFor((f) => f.type === 'scrollback_end' && f.ch === 6)
    // Reads of at least JOIN_MIN_BYTES wait for the other reads of their turn; none follow here,
    // and the run neither ends nor prints again until interrupted, so the join alone sends them.
    const pending = c.call('session.run', {
      sessionId: 'default',
      id: 'burst',
      command: 'head -c 5000 /dev/zero; head -c 3000 /dev/zero >&2; sleep 30',
      buffer: false,
    })
    pending.catch(() => {})
    const sent = (type: string): number =>
      outputFrames(c, 6)
        .filter((f) => f.type === type && f.id === 'burst')
        .reduce((n, f) => n + f.payload.byteLength, 0)
    await vi.waitFor(() => expect([sent('shell_out'), sent('shell_err')]).toEqual([5000, 3000]), {
      timeout: 10_000,
    })
    expect(c.frames.some((f) => f.type === 'shell_exit' && f.id === 'burst')).toBe(false)
    await c.call('session.interrupt', { sessionId: 'default' })
    await c.waitFor((f) => f.type === 'shell_exit' && f.id === 'burst')
    await pending.catch(() => {})
  })

  test('a sandbox flooding output gets no more than the window plus one chunk past the credit', async ({
    agent,
  }) => {
    const c = await agent.connect()
    // No credit is ever granted on this channel: the attacker's flood must stall.
    await c.call('session.attach', { sessionId: 'default', ch: 4 })
    const pending = c.call('session.run', {
      sessionId: 'default',
      id: 'flood',
      command: 'head -c 100000000 /dev/zero',
      buffer: false,
    })
    pending.catch(() => {})
    const received = (): number => outputFrames(c, 4).reduce((n, f) => n + f.payload.byteLength, 0)
    await vi.waitFor(() => expect(received()).toBeGreaterThanOrEqual(LIMITS.channelWindowBytes), {
      timeout: 10_000,
    })
    // The session is paused: round trips on the same link (the agent's loop runs between them,
    // reading bash's pipes if it would) still see no more than the bound.
    for (let i = 0; i < 5; i++) {
      await c.call('session.list', {})
      expect(received()).toBeLessThanOrEqual(LIMITS.channelWindowBytes + LIMITS.maxDataChunkBytes)
    }
    await c.call('session.interrupt', { sessionId: 'default' })
    c.send({ type: 'close', ch: 4 })
    await pending.catch(() => {})
  })
})
