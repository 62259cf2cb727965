import { createHash, randomBytes } from 'node:crypto'
import { LIMITS, type TerminalAttachment, type TerminalInfo } from '@conch/protocol'
import { describe, expect, vi } from 'vitest'
import { systemClock } from '../src/clock.ts'
import { MAX_RETRY_MS } from '../src/pty-input.ts'
import { servedAgentTest } from './served-agent.ts'

// Input to a program on a pty that is not reading it yet: the tty's input queue fills (4 KiB in
// raw mode) and the pty refuses more. The agent keeps the rest in order, tries again on a timer
// rather than at once, hands every byte over once the program reads, and returns the runner's
// credit for input only as the pty takes it.

/** Delays of the timers the agent set, in order: the input writer's tries show among them. */
const timers: number[] = []
const test = servedAgentTest({
  clock: {
    ...systemClock,
    setTimer: (ms, fn) => {
      timers.push(ms)
      return systemClock.setTimer(ms, fn)
    },
  },
})

/** Raw mode, then waits for SIGCONT before it reads `n` bytes and prints their sha256. */
function readsAfterSignal(n: number): string[] {
  const script = [
    'import hashlib, os, signal, sys, tty',
    'tty.setraw(0)',
    'signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCONT})',
    "print('waiting', end='\\r\\n', flush=True)",
    'signal.sigwait({signal.SIGCONT})',
    `h, left = hashlib.sha256(), ${n}`,
    'while left > 0:',
    '    b = os.read(0, min(left, 65536))',
    '    h.update(b)',
    '    left -= len(b)',
    "print('got', h.hexdigest(), end='\\r\\n', flush=True)",
  ].join('\n')
  return ['python3', '-c', script]
}

describe('terminal input', () => {
  test('waits, whole and in order, for a program that reads it late, without keeping the agent busy', async ({
    agent,
  }) => {
    const input = randomBytes(1024 * 1024)
    const c = await agent.connect()
    const t = await c.call<TerminalInfo>('terminal.open', { command: readsAfterSignal(input.byteLength) })
    const ch = 1
    const attached = await c.call<TerminalAttachment>('terminal.attach', { terminal: t.id, ch })
    expect(attached.inputWindow).toBe(LIMITS.channelWindowBytes)
    const screen = () =>
      Buffer.concat(c.frames.filter((f) => f.type === 'data' && f.ch === ch).map((f) => f.payload)).toString()
    await c.waitFor(() => screen().includes('waiting'))
    for (let at = 0; at < input.byteLength; at += 64 * 1024) {
      c.send({ type: 'data', ch }, input.subarray(at, at + 64 * 1024))
    }
    // The pty takes about 4 KiB; the rest waits in the agent. Waiting costs no CPU to speak of
    // (node-pty's own writer tried again on every turn of the event loop: most of a core).
    await c.call('terminal.get', { terminal: t.id })
    const cpu0 = process.cpuUsage()
    const wall0 = performance.now()
    // The writer tries again on a timer: ten tries at its longest wait span at least a second.
    const tries = timers.length
    await vi.waitFor(
      () => expect(timers.slice(tries).filter((ms) => ms === MAX_RETRY_MS).length).toBeGreaterThanOrEqual(10),
      { timeout: 10_000 },
    )
    const cpu = process.cpuUsage(cpu0)
    const busy = (cpu.user + cpu.system) / 1000 / (performance.now() - wall0)
    expect(busy).toBeLessThan(0.3)
    // Credit comes back only for what the pty took (batched by a quarter of the window).
    const credited = () =>
      c.frames.reduce((n, f) => (f.type === 'credit' && f.ch === ch ? n + f.bytes : n), 0)
    expect(credited()).toBe(0)

    await c.call('terminal.signal', { terminal: t.id, signal: 'SIGCONT' })
    await c.waitFor(() => /got [0-9a-f]{64}/.test(screen()))
    expect(screen()).toContain(`got ${createHash('sha256').update(input).digest('hex')}`)
    await c.waitFor(() => credited() === input.byteLength)
  })

  test('input pending when the program exits is dropped, and the agent serves the next terminal', async ({
    agent,
  }) => {
    const c = await agent.connect()
    const t = await c.call<TerminalInfo>('terminal.open', { command: readsAfterSignal(1) })
    await c.call('terminal.attach', { terminal: t.id, ch: 1 })
    await c.waitFor((f) => f.type === 'data' && f.ch === 1 && f.payload.toString().includes('waiting'))
    for (let i = 0; i < 8; i++) c.send({ type: 'data', ch: 1 }, randomBytes(64 * 1024))
    await c.call('terminal.get', { terminal: t.id })
    await c.call('terminal.signal', { terminal: t.id, signal: 'SIGKILL' })
    await c.waitFor((f) => f.type === 'end' && f.ch === 1)

    const next = await c.call<TerminalInfo>('terminal.open', { command: ['bash', '--norc'] })
    await c.call('terminal.attach', { terminal: next.id, ch: 2 })
    c.send({ type: 'data', ch: 2 }, Buffer.from('echo next-$((6*7))\r'))
    await c.waitFor((f) => f.type === 'data' && f.ch === 2 && f.payload.toString().includes('next-42'))
  })
})
