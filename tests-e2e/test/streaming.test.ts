import { describe, expect } from 'vitest'
import { test } from './runner-fixture.ts'

type Arrival = { stream: 'stdout' | 'stderr' | 'exit'; data: string }

describe('streaming', () => {
  test('delivers each line before the exit, in order, on its own stream', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const arrivals: Arrival[] = []
    const command = 'for i in 1 2 3 4 5 6; do echo "out $i"; echo "err $i" >&2; sleep 0.1; done; (exit 3)'
    for await (const event of sh.stream(command)) {
      if (event.type === 'exit') arrivals.push({ stream: 'exit', data: String(event.exitCode) })
      else arrivals.push({ stream: event.type, data: event.data })
    }
    expect(arrivals.at(-1)).toEqual({ stream: 'exit', data: '3' })
    expect(arrivals.filter((a) => a.stream === 'exit')).toHaveLength(1)
    const text = (stream: Arrival['stream']): string =>
      arrivals
        .filter((a) => a.stream === stream)
        .map((a) => a.data)
        .join('')
    expect(text('stdout')).toBe('out 1\nout 2\nout 3\nout 4\nout 5\nout 6\n')
    expect(text('stderr')).toBe('err 1\nerr 2\nerr 3\nerr 4\nerr 5\nerr 6\n')
  })

  test('delivers output while the command is still running', async ({ sandbox }) => {
    // The command prints a line, then blocks until the test has seen that line and answered
    // by creating a file: only live streaming lets it finish.
    await using sh = await sandbox.shell()
    await sh.run('rm -f e2e-go')
    const seen: string[] = []
    let released: Promise<{ exitCode: number }> | undefined
    const result = await sh.run(
      'echo waiting; while [ ! -e e2e-go ]; do sleep 0.02; done; echo released; echo done >&2',
      {
        timeoutMs: 30_000,
        onStdout: (chunk: string) => {
          seen.push(chunk)
          // The exec is awaited below (left floating, it could fail after the test ended); the
          // empty catch only keeps a failure before that await from counting as unhandled.
          if (!released && seen.join('').includes('waiting\n')) {
            released = sandbox.exec('touch e2e-go')
            released.catch(() => {})
          }
        },
      },
    )
    expect((await released)?.exitCode).toBe(0)
    expect(result.timedOut).toBe(false)
    expect(result.stdout).toBe('waiting\nreleased\n')
    expect(result.stderr).toBe('done\n')
    expect(seen.join('')).toBe('waiting\nreleased\n')
  })

  test('calls onStdout and onStderr with each stream in order', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const out: string[] = []
    const err: string[] = []
    const result = await sh.run('for i in 1 2 3; do echo "o$i"; echo "e$i" >&2; sleep 0.1; done', {
      onStdout: (chunk: string) => out.push(chunk),
      onStderr: (chunk: string) => err.push(chunk),
    })
    expect(out.join('')).toBe('o1\no2\no3\n')
    expect(err.join('')).toBe('e1\ne2\ne3\n')
    expect(result.stdout).toBe(out.join(''))
    expect(result.stderr).toBe(err.join(''))
  })

  test('keeps a slow reader’s unconsumed output within two windows, and the output exact', async ({
    sandbox,
  }) => {
    // A reader that sleeps on every event is far slower than `yes`: without backpressure the
    // client would hold nearly all 32 MiB. The SDK holds at most its 1 MiB window plus the
    // agent's 1 MiB channel window and one chunk.
    const bound = 2 * 1024 * 1024 + 64 * 1024
    const total = 32 * 1024 * 1024
    await using sh = await sandbox.shell()
    let at = 0
    let max = 0
    for await (const event of sh.stream(`yes | head -c ${total}`, { timeoutMs: 600_000 })) {
      max = Math.max(max, sh.bufferedBytes)
      if (event.type === 'exit') expect(event.exitCode).toBe(0)
      else {
        for (let i = 0; i < event.data.length; i++) {
          if (event.data.charCodeAt(i) !== ((at + i) % 2 === 0 ? 0x79 : 0x0a))
            throw new Error(`byte ${at + i}`)
        }
        at += event.data.length
        await new Promise((r) => setTimeout(r, 2))
      }
    }
    expect(at).toBe(total)
    expect(max).toBeGreaterThan(0)
    expect(max).toBeLessThanOrEqual(bound)
  }, 300_000)
})
