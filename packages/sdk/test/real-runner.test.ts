import { test as base, describe, expect } from 'vitest'
import { WebSocket as WsWebSocket } from 'ws'
import { OutputLostError, Sandbox, type WebSocketConstructor } from '../src/index.ts'
import { type RunnerChild, startRunnerChild } from './runner-child.ts'

// The SDK against the real runner CLI (child process, port 0, temp state dir). The shell's
// socket is a `ws` socket the test can kill, as a network failure would.

interface Fixtures {
  runner: RunnerChild
  sockets: WsWebSocket[]
  sb: Sandbox
}

const test = base.extend<Fixtures>({
  runner: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
    async ({}, use) => {
      await using runner = await startRunnerChild()
      await use(runner)
    },
    { scope: 'file' },
  ],
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
  sockets: async ({}, use) => {
    await use([])
  },
  sb: async ({ runner, sockets }, use) => {
    await using sb = await Sandbox.create({
      url: runner.url,
      apiKey: runner.apiKey,
      WebSocket: recording(sockets),
      connection: { reconnectBaseDelayMs: 20 },
    })
    await use(sb)
  },
})

/** A `ws` WebSocket class that records every socket it opens into `sockets`. */
function recording(sockets: WsWebSocket[]): WebSocketConstructor {
  return class RecordingWebSocket extends WsWebSocket {
    constructor(url: string, protocols: string[]) {
      super(url, protocols)
      sockets.push(this)
    }
  }
}

/** Resolves when `predicate` holds, checked after every event-loop turn. */
async function until(predicate: () => boolean): Promise<void> {
  while (!predicate()) await new Promise((r) => setImmediate(r))
}

describe('against the real runner', () => {
  test('disposes a shell cleanly after its sandbox was destroyed', async ({ runner }) => {
    const sb = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey, WebSocket: WsWebSocket })
    const sh = await sb.shell()
    expect((await sh.run('echo ok')).stdout).toBe('ok\n')
    await sb.destroy()
    await expect(sh[Symbol.asyncDispose]()).resolves.toBeUndefined()
  })

  test('completes the in-flight run exactly when the socket dies mid-run', async ({ sb, sockets }) => {
    await using sh = await sb.shell()
    const seen: string[] = []
    const pending = sh.run('printf first; sleep 0.5; printf second; printf err >&2; (exit 4)', {
      onStdout: (s) => seen.push(s),
    })
    await until(() => seen.length > 0)
    sockets.at(-1)?.terminate()
    const result = await pending
    expect(result).toMatchObject({ stdout: 'firstsecond', stderr: 'err', exitCode: 4, timedOut: false })
    expect(seen.join('')).toBe('firstsecond')
    expect(sockets.length).toBe(2)
    expect((await sh.run('echo still here')).stdout).toBe('still here\n')
  })

  test('runs 100 concurrent commands in call order', async ({ sb }) => {
    await using sh = await sb.shell()
    await sh.run('n=0')
    const results = await Promise.all(Array.from({ length: 100 }, () => sh.run('n=$((n+1)); echo $n')))
    expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 100 }, (_, i) => `${i + 1}\n`))
  })

  test('fails the in-flight run with OutputLostError when its output was evicted while away', async ({
    runner,
    sockets,
  }) => {
    // A long first reconnect delay keeps the client away while the command overruns the scrollback.
    await using sb = await Sandbox.create({
      url: runner.url,
      apiKey: runner.apiKey,
      WebSocket: recording(sockets),
      connection: { reconnectBaseDelayMs: 4_000 },
    })
    await using sh = await sb.shell()
    const seen: string[] = []
    const pending = sh.run('printf start; sleep 0.3; head -c 12000000 /dev/zero | tr "\\0" x; echo', {
      onStdout: (s) => seen.push(s),
    })
    await until(() => seen.length > 0)
    sockets.at(-1)?.terminate()
    const err = await pending.catch((e: unknown) => e)
    expect(err).toBeInstanceOf(OutputLostError)
    expect((err as OutputLostError).earliestOffset).toBeGreaterThan(5)
    expect((await sh.run('echo usable')).stdout).toBe('usable\n')
  }, 30_000)
})
