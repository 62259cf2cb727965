// BashProcess's writes into bash's stdin pipe: straight into the pipe while it has room, through
// the stream once it is full, and never out of order. A stopped reader fills the pipe.
import { readFileSync } from 'node:fs'
import { describe, expect, test, vi } from 'vitest'
import { BashProcess } from '../src/bash-process.ts'
import { systemClock } from '../src/clock.ts'
import { nodeSpawn, type Spawn } from '../src/spawner.ts'

/** A reader that stops itself before reading, then copies stdin to stdout once continued. */
const stoppedCat: Spawn = (_command, _args, options) =>
  nodeSpawn('sh', ['-c', 'kill -STOP $$; exec cat'], options)

function state(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]!.split(' ')[0]!
}

describe('BashProcess.write', () => {
  test('keeps every byte in order when a write overflows the pipe and the reader then drains it', async () => {
    const out: Buffer[] = []
    let exited = false
    const bash = new BashProcess(
      {
        spawn: stoppedCat,
        bashPath: 'bash',
        cwd: '/',
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        clock: systemClock,
      },
      { onChunk: (stream, chunk) => stream === 'stdout' && out.push(chunk), onExit: () => (exited = true) },
    )
    const pid = bash.pid!
    await vi.waitFor(() => expect(state(pid)).toBe('T'))
    // One write far larger than the pipe (64 KiB): the pipe takes part of it, the rest waits in
    // the stream.
    const big = Array.from({ length: 4000 }, (_, i) => `line ${i} ${'x'.repeat(40)}\n`).join('')
    bash.write('first\n')
    bash.write(big)
    process.kill(pid, 'SIGCONT')
    // Without letting the event loop flush the stream, give the reader time to drain the pipe:
    // a line written now must still queue behind the bytes waiting in the stream.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300)
    bash.write('last\n')
    const expected = `first\n${big}last\n`
    await vi.waitFor(() => expect(Buffer.concat(out).length).toBe(Buffer.byteLength(expected)), {
      timeout: 10_000,
    })
    expect(Buffer.concat(out).toString()).toBe(expected)
    expect(exited).toBe(false)
    bash.destroy()
    process.kill(pid, 'SIGKILL')
  })

  test('a write after the reader is gone neither throws nor reports anything but the exit', async () => {
    const exits: string[] = []
    const bash = new BashProcess(
      {
        spawn: (_c, _a, o) => nodeSpawn('sh', ['-c', 'exec 0<&-; exit 3'], o),
        bashPath: 'bash',
        cwd: '/',
        env: {},
        clock: systemClock,
      },
      { onChunk: () => {}, onExit: (info) => exits.push(info.reason) },
    )
    await vi.waitFor(() => expect(exits).toEqual(['bash exited with code 3']))
    // EPIPE on the direct write: ignored, as the stream's own errors are.
    expect(() => bash.write('echo late\n')).not.toThrow()
    bash.destroy()
  })
})
