import type { TerminalInfo } from '@conch/protocol'
import { describe, expect } from 'vitest'
import { systemClock } from '../src/clock.ts'
import type { AgentClient, Received } from './agent-client.ts'
import { servedAgentTest } from './served-agent.ts'

// Terminals over the agent link with real programs on real ptys (node-pty): what a user types
// arrives as `data` frames on the attached channel, the screen comes back as `data` frames.

const test = servedAgentTest({ maxTerminals: 3 })

/** The agent's clock, which a test moves forward to end the time a resize is held. */
let skewMs = 0
const skewedTest = servedAgentTest({
  clock: { ...systemClock, monotonicMs: () => systemClock.monotonicMs() + skewMs },
})

/**
 * A program that does what readline does around each prompt, in two steps a test drives: reads
 * the size (`read-size`), then on Enter writes that size back (`wrote-back`), then on Enter
 * prints the size it sees. Echo is off, so the program's own lines are all the output.
 */
const WRITES_BACK_SIZE = [
  'python3',
  '-c',
  [
    'import fcntl, struct, sys, termios',
    'a = termios.tcgetattr(0); a[3] &= ~termios.ECHO; termios.tcsetattr(0, termios.TCSANOW, a)',
    'size = lambda: fcntl.ioctl(0, termios.TIOCGWINSZ, bytes(8))',
    'old = size()',
    "print('read-size', flush=True)",
    'sys.stdin.readline()',
    'fcntl.ioctl(0, termios.TIOCSWINSZ, old)',
    "print('wrote-back', flush=True)",
    'sys.stdin.readline()',
    "rows, cols = struct.unpack('HH', size()[:4])",
    "print(f'size {rows} {cols}', flush=True)",
    'sys.stdin.readline()',
  ].join('\n'),
]

let nextCh = 1

/** A channel attached to a terminal: collects the screen bytes and grants credit as it reads. */
async function attach(c: AgentClient, terminal: string, offset?: number) {
  const ch = nextCh++
  const info = await c.call<TerminalInfo>('terminal.attach', {
    terminal,
    ch,
    ...(offset === undefined ? {} : { offset }),
  })
  const screen = () =>
    Buffer.concat(c.frames.filter((f) => f.type === 'data' && f.ch === ch).map((f) => f.payload)).toString()
  return {
    ch,
    info,
    screen,
    type: (text: string) => c.send({ type: 'data', ch }, Buffer.from(text)),
    until: async (match: RegExp | string) => {
      const seen = () => (typeof match === 'string' ? screen().includes(match) : match.test(screen()))
      await c.waitFor(seen)
      return screen()
    },
    end: () => c.waitFor((f: Received) => f.type === 'end' && f.ch === ch),
  }
}

describe('terminals on the agent', () => {
  test('bash on a pty: cd and pwd, stty size after a resize, Ctrl-C, then Ctrl-D exits 0', async ({
    agent,
  }) => {
    const c = await agent.connect()
    const t = await c.call<TerminalInfo>('terminal.open', { cols: 80, rows: 24, command: ['bash', '--norc'] })
    const a = await attach(c, t.id)
    a.type('cd /tmp; pwd\r')
    await a.until(/[\r\n]\/tmp\r\n/)
    a.type('stty size\r')
    await a.until(/24 80\r\n/)
    const resized = await c.call<TerminalInfo>('terminal.resize', { terminal: t.id, cols: 100, rows: 30 })
    expect(resized).toMatchObject({ cols: 100, rows: 30 })
    a.type('stty size\r')
    await a.until(/30 100\r\n/)
    a.type("bash -c 'echo read''y; exec sleep 100'\r")
    await a.until(/[\r\n]ready\r\n/)
    a.type('\x03')
    await a.until(/ready\r\n\^C[\s\S]*# $/)
    a.type('echo after-$?\r')
    // Ctrl-D only at the prompt, as a person types it: typed while bash is between commands,
    // the tty takes it as end-of-line and readline then reads a NUL.
    await a.until(/after-130\r\n[\s\S]*# $/)
    a.type('\x04')
    const end = await a.end()
    expect(end).toMatchObject({ type: 'end', exitCode: 0 })
    expect(await c.call('terminal.get', { terminal: t.id })).toMatchObject({ exitCode: 0 })
  })

  test('a resize holds when the program writes back the size it read just before (readline does, at each prompt)', async ({
    agent,
  }) => {
    const c = await agent.connect()
    const t = await c.call<TerminalInfo>('terminal.open', { cols: 80, rows: 24, command: WRITES_BACK_SIZE })
    const a = await attach(c, t.id)
    await a.until('read-size')
    await c.call('terminal.resize', { terminal: t.id, cols: 100, rows: 30 })
    a.type('\r')
    await a.until('wrote-back')
    a.type('\r')
    expect(await a.until(/size \d+ \d+/)).toContain('size 30 100')
    expect(await c.call('terminal.get', { terminal: t.id })).toMatchObject({ cols: 100, rows: 30 })
    await c.call('terminal.close', { terminal: t.id })
  })

  test('a python REPL and a getpass prompt, answered by typing; tput colours reach the screen', async ({
    agent,
  }) => {
    const c = await agent.connect()
    const py = await c.call<TerminalInfo>('terminal.open', { command: ['python3', '-q'] })
    const a = await attach(c, py.id)
    await a.until(/>>> /)
    a.type('print(6*7)\r')
    await a.until(/42\r\n/)
    a.type('import getpass; pw = getpass.getpass("password: ")\r')
    await a.until(/\r\npassword: $/)
    a.type('hunter2\r')
    await a.until(/password: \r\n>>> /)
    a.type('print(len(pw), pw[::-1])\r')
    const screen = await a.until(/7 2retnuh/)
    // getpass turns echo off: the typed secret never appears on the screen.
    expect(screen).not.toContain('hunter2')
    a.type('exit()\r')
    await a.end()

    const sh = await c.call<TerminalInfo>('terminal.open', { command: ['bash', '--norc'] })
    const b = await attach(c, sh.id)
    b.type('tput setaf 1; echo red; tput sgr0\r')
    await b.until('\x1b[31mred')
    await c.call('terminal.close', { terminal: sh.id })
  })

  test('a second client replays the screen from offset 0 and both can type; less draws and quits', async ({
    agent,
  }) => {
    const c = await agent.connect()
    const t = await c.call<TerminalInfo>('terminal.open', { command: ['bash', '--norc'], rows: 10 })
    const a = await attach(c, t.id)
    a.type('seq 1 100 | less\r')
    await a.until('\x1b[?1049h')
    const b = await attach(c, t.id, 0)
    await b.until(/seq 1 100 \| less/)
    b.type('q')
    a.type('echo done-from-a\r')
    await a.until(/done-from-a\r\n/)
    await b.until(/done-from-a\r\n/)
    await c.call('terminal.close', { terminal: t.id })
  })

  test('attacks: hostile sizes, unknown ids, offsets past the end, too many terminals, input after close', async ({
    agent,
  }) => {
    const c = await agent.connect()
    const t = await c.call<TerminalInfo>('terminal.open', { command: ['bash', '--norc'] })
    for (const [cols, rows] of [
      [0, 24],
      [80, 0],
      [-5, 24],
      [1e9, 24],
      [80.5, 24],
    ]) {
      await expect(c.call('terminal.resize', { terminal: t.id, cols, rows })).rejects.toMatchObject({
        code: 'BAD_REQUEST',
      })
    }
    await expect(c.call('terminal.open', { cols: 0 })).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    await expect(c.call('terminal.get', { terminal: 't_0000000000000000' })).rejects.toMatchObject({
      code: 'TERMINAL_NOT_FOUND',
    })
    await expect(c.call('terminal.get', { terminal: '../../etc' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    })
    await expect(c.call('terminal.attach', { terminal: t.id, ch: 90, offset: 1e6 })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    })
    await c.call('terminal.open', { command: ['bash', '--norc'] })
    await c.call('terminal.open', { command: ['bash', '--norc'] })
    await expect(c.call('terminal.open', {})).rejects.toMatchObject({
      code: 'TOO_MANY_TERMINALS',
      details: { limit: 3 },
    })
    const a = await attach(c, t.id)
    await c.call('terminal.close', { terminal: t.id })
    a.type('echo never\r')
    await expect(c.call('terminal.get', { terminal: t.id })).rejects.toMatchObject({
      code: 'TERMINAL_NOT_FOUND',
    })
    // A closed slot is free again.
    await c.call('terminal.open', { command: ['bash', '--norc'] })
  })

  skewedTest('the hold ends: a size the program sets itself later stands', async ({ agent }) => {
    const c = await agent.connect()
    const t = await c.call<TerminalInfo>('terminal.open', { cols: 80, rows: 24, command: ['bash', '--norc'] })
    const a = await attach(c, t.id)
    await a.until(/# $/)
    await c.call('terminal.resize', { terminal: t.id, cols: 100, rows: 30 })
    a.type('echo resized\r')
    await a.until(/resized\r\n[\s\S]*# $/)
    skewMs += 60_000
    // The program sets its size and prints (the output a hold would answer), then reads it.
    a.type('stty rows 10 cols 50; echo set-$((1+1)); read; stty size\r')
    await a.until('set-2\r\n')
    a.type('\r')
    expect(await a.until(/\r\n\d+ \d+\r\n/)).toMatch(/\r\n10 50\r\n/)
    await c.call('terminal.close', { terminal: t.id })
  })

  test('a program that floods output with nobody attached keeps only the bounded scrollback; an old offset is OUTPUT_LOST', async ({
    agent,
  }) => {
    const c = await agent.connect()
    const t = await c.call<TerminalInfo>('terminal.open', { command: ['bash', '--norc', '-c', 'yes flood'] })
    let info = t
    while (info.startOffset === 0) {
      info = await c.call<TerminalInfo>('terminal.get', { terminal: t.id })
    }
    expect(info.endOffset - info.startOffset).toBeLessThanOrEqual(1_048_576)
    await expect(c.call('terminal.attach', { terminal: t.id, ch: 91, offset: 0 })).rejects.toMatchObject({
      code: 'OUTPUT_LOST',
      details: { earliestOffset: expect.any(Number) },
    })
    await c.call('terminal.close', { terminal: t.id })
  })
})
