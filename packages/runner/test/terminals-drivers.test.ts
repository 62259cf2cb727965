import { Sandbox } from '@conch/sdk'
import { describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { gvisorRunner } from './gvisor-runner.ts'
import { nsRunner } from './namespace-runner.ts'
import { rootlessRunner } from './rootless-runner.ts'
import { baseUrl } from './runner-fixture.ts'
import { screenOf, sizeAfterWriteBack } from './terminal-screen.ts'

// A terminal inside an isolated sandbox: node-pty's addon loads from /opt/conch/node-pty. In a
// namespace sandbox the
// program runs as the sandbox user on the sandbox's own devpts instance, and the terminal cannot
// reach the host's ptys or push keystrokes into one (TIOCSTI is refused by seccomp).

describe('terminals in a namespace sandbox', () => {
  it('runs on the sandbox’s own devpts as the sandbox user; TIOCSTI and the host’s ptys are out of reach; a resize holds', async () => {
    await using runner = await nsRunner({ listen: true })
    await using sb = await Sandbox.create({ url: baseUrl(runner.app), apiKey: runner.apiKey, WebSocket })
    const term = await sb.terminal({ command: ['bash', '--norc'] })
    const { until } = screenOf(term)
    term.write('echo "tty=$(tty) uid=$(id -u) pts=$(ls /dev/pts | tr "\\n" ,)"\r')
    const screen = await until(/tty=\S+ uid=\d+ pts=\S*\r\n/)
    const [, tty, uid, pts] = /tty=(\S+) uid=(\d+) pts=(\S*)\r\n/.exec(screen) ?? []
    expect(tty).toBe('/dev/pts/0')
    expect(Number(uid)).not.toBe(0)
    // Only this sandbox's own pty and the multiplexer: a fresh devpts instance.
    expect(pts?.split(',').filter(Boolean).sort()).toEqual(['0', 'ptmx'])
    term.write(
      `python3 -c 'import fcntl,termios,sys
try:
  fcntl.ioctl(0, termios.TIOCSTI, b"x"); print("sti-allowed")
except OSError as e: print("sti-refused", e.errno)'\r`,
    )
    const after = await until(/sti-(allowed|refused \d+)\r\n/)
    expect(after).toMatch(/sti-refused \d+\r\n/)
    // The agent reaches the program's side of the pty in the sandbox to hold a resize.
    expect(await sizeAfterWriteBack(term)).toBe('30x100')
    await term.close()
  })
})

describe('terminals in a gVisor sandbox', () => {
  it('loads node-pty inside runsc and runs a program on its pty as the sandbox user; a resize holds', async () => {
    await using runner = await gvisorRunner({ listen: true })
    await using sb = await Sandbox.create({ url: baseUrl(runner.app), apiKey: runner.apiKey, WebSocket })
    const term = await sb.terminal({ command: ['bash', '--norc'], cols: 90, rows: 20 })
    const { until } = screenOf(term)
    term.write('echo "size=$(stty size) uid=$(id -u) tty=$(tty)"\r')
    const screen = await until(/size=\d+ \d+ uid=\d+ tty=\S+\r\n/)
    expect(screen).toMatch(/size=20 90 uid=[1-9]\d* tty=\/dev\/pts\/\d+\r\n/)
    expect(await sizeAfterWriteBack(term)).toBe('30x100')
    await term.close()
  })
})

describe('terminals in a rootless namespace sandbox', () => {
  it('loads node-pty from the runtime image and gives the sandbox its own devpts', async () => {
    await using runner = await rootlessRunner()
    await using sb = await Sandbox.connect((await runner.create()).id, {
      url: runner.url,
      apiKey: runner.apiKey,
      WebSocket,
    })
    const term = await sb.terminal({ command: ['bash', '--norc'], cols: 70, rows: 15 })
    const { until } = screenOf(term)
    term.write('echo "size=$(stty size) tty=$(tty) pts=$(ls /dev/pts | tr "\\n" ,)"\r')
    const screen = await until(/size=\d+ \d+ tty=\S+ pts=\S*\r\n/)
    expect(screen).toMatch(/size=15 70 tty=\/dev\/pts\/0 pts=0,ptmx,\r\n/)
    await term.close()
  })
})
