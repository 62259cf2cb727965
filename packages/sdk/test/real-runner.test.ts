import { LIMITS } from '@conch/protocol'
import { test as base, describe, expect, vi } from 'vitest'
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

  test('gets output as binary frames from a runner with binary_output', async ({ sb, sockets }) => {
    await using sh = await sb.shell()
    const socket = sockets.at(-1)
    let binary = 0
    let json = 0
    socket?.on('message', (data, isBinary) => {
      if (isBinary) binary++
      else if (String(data).includes('"shell_out"')) json++
    })
    const r = await sh.run("printf '\\x00\\xff'", { encoding: 'binary' })
    expect(r.stdout).toEqual(new Uint8Array([0, 0xff]))
    expect(binary).toBeGreaterThan(0)
    expect(json).toBe(0)
  })

  test('gets a short run as one message (start_in_exit) and still feeds piped runs once they start', async ({
    sb,
    sockets,
  }) => {
    await using sh = await sb.shell()
    const frames: { type: string; startOffset?: number }[] = []
    sockets.at(-1)?.on('message', (data, isBinary) => {
      if (!isBinary) frames.push(JSON.parse(String(data)))
    })
    for (let i = 0; i < 20; i++) expect((await sh.run('true')).exitCode).toBe(0)
    const runFrames = frames.filter((f) => f.type.startsWith('shell_'))
    const folded = runFrames.filter((f) => f.type === 'shell_exit' && f.startOffset === sh.offset)
    // A start leaves alone only when bash outlasts the agent's lazy wait (a loaded machine).
    expect(folded.length).toBeGreaterThan(10)
    expect(runFrames.length - folded.length).toBe(2 * (20 - folded.length))
    const piped = sh.run('read -r line; echo "got $line"', { stdin: 'pipe' })
    piped.write('hi\n')
    expect((await piped).stdout).toBe('got hi\n')
    const ignored = sh.run('true', { stdin: 'pipe' })
    ignored.end('never read\n')
    expect((await ignored).exitCode).toBe(0)
    expect((await sh.run('echo after')).stdout).toBe('after\n')
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

  describe('backpressure: a slow consumer slows the command', () => {
    /** What the runner may have sent past the shell's last ack: a window, the agent's channel, one chunk. */
    const BOUND = LIMITS.clientWindowBytes + LIMITS.channelWindowBytes + LIMITS.maxDataChunkBytes
    const TOTAL = 64 * 1024 * 1024

    /** A command writing `yes` output, noting its writer's pid in `writer.pid`; may run for minutes. */
    const FLOOD = `yes | { echo $BASHPID > writer.pid; exec head -c ${TOTAL}; }`
    const LONG = { timeoutMs: 600_000 }

    /** Kernel wait channels of a write blocked on a full pipe or unix socket (bash's stdout). */
    const BLOCKED_IN_WRITE = /pipe_write|sock_alloc_send_pskb|unix_stream_sendmsg/

    /** Resolves once the writer in the sandbox is blocked on its full stdout pipe. */
    async function writerBlocked(sb: Sandbox): Promise<void> {
      await vi.waitFor(
        async () => {
          const r = await sb.exec('cat /proc/$(cat writer.pid)/wchan')
          expect(r.stdout).toMatch(BLOCKED_IN_WRITE)
        },
        { timeout: 60_000, interval: 50 },
      )
    }

    /** Checks `yes` output chunk by chunk: "y\n" repeated, from byte `at`; returns the new position. */
    function checkYes(chunk: string, at: number): number {
      for (let i = 0; i < chunk.length; i++) {
        if (chunk.charCodeAt(i) !== ((at + i) % 2 === 0 ? 0x79 : 0x0a))
          throw new Error(`byte ${at + i} is wrong`)
      }
      return at + chunk.length
    }

    test('holds at most two windows for a stream reader that stops, and the output stays exact', async ({
      sb,
    }) => {
      await using sh = await sb.shell()
      const events = sh.stream(FLOOD, LONG)
      let at = 0
      let max = 0
      const first = await events.next()
      if (first.done || first.value.type !== 'stdout') throw new Error('expected stdout first')
      at = checkYes(first.value.data, at)
      await writerBlocked(sb)
      expect(sh.bufferedBytes).toBeGreaterThan(0)
      expect(sh.bufferedBytes).toBeLessThanOrEqual(BOUND)
      let n = 0
      for await (const ev of events) {
        max = Math.max(max, sh.bufferedBytes)
        if (ev.type === 'exit') {
          expect(ev.exitCode).toBe(0)
          break
        }
        if (ev.type === 'stdout') at = checkYes(ev.data, at)
        // A reader slower than the command: it yields to the event loop on every event.
        if (++n % 4 === 0) await new Promise((r) => setTimeout(r, 1))
      }
      expect(at).toBe(TOTAL)
      expect(max).toBeLessThanOrEqual(BOUND)
      expect(sh.bufferedBytes).toBe(0)
    }, 180_000)

    test('waits for a callback that returns a promise before it takes more output', async ({ sb }) => {
      await using sh = await sb.shell()
      let at = 0
      let max = 0
      const gate: { open?: () => void } = {}
      let blocked = false
      const done = sh.run(FLOOD, {
        ...LONG,
        onStdout: async (chunk) => {
          max = Math.max(max, sh.bufferedBytes)
          at = checkYes(chunk, at)
          if (!blocked) await new Promise<void>((r) => (gate.open = r))
        },
      })
      await vi.waitFor(() => expect(gate.open).toBeDefined())
      await writerBlocked(sb)
      expect(sh.bufferedBytes).toBeLessThanOrEqual(BOUND)
      blocked = true
      gate.open?.()
      const r = await done
      expect(r).toMatchObject({ exitCode: 0, stdoutBytes: TOTAL, truncated: true })
      expect(at).toBe(TOTAL)
      expect(max).toBeLessThanOrEqual(BOUND)
    }, 180_000)

    test('paces every client of the session by its slowest reader, and each gets the exact output', async ({
      sb,
    }) => {
      await using slow = await sb.shell()
      let watched = 0
      await using watcher = await sb.reattachShell(slow.sessionId, {
        onOutput: ({ data }) => {
          watched += data.length
        },
      })
      const events = slow.stream(FLOOD, LONG)
      await events.next()
      await writerBlocked(sb)
      // The watcher is stalled with the slow reader (the agent pauses bash for its slowest
      // subscriber), yet a shell on another session of the sandbox runs meanwhile.
      expect(watched).toBeLessThan(TOTAL)
      await using other = await sb.shell()
      expect((await other.run('echo other')).stdout).toBe('other\n')
      let at = 0
      for await (const ev of events) if (ev.type === 'stdout') at += ev.data.length
      expect(at).toBeGreaterThan(TOTAL - LIMITS.maxDataChunkBytes * 2)
      await vi.waitFor(() => expect(watched).toBe(TOTAL), { timeout: 60_000 })
      expect(watcher.isOpen).toBe(true)
    }, 180_000)
  })

  test('sets idle lifetimes on create, and holds a sandbox awake with keepAlive lowered to the runner cap', async ({
    runner,
  }) => {
    await using sb = await Sandbox.create({
      url: runner.url,
      apiKey: runner.apiKey,
      WebSocket: WsWebSocket,
      hibernateAfterMs: 5 * 60_000,
      idleTimeoutMs: 60 * 60_000,
      sessionIdleTimeoutMs: null,
    })
    expect(sb.info).toMatchObject({
      hibernateAfterMs: 300_000,
      idleTimeoutMs: 3_600_000,
      sessionIdleTimeoutMs: null,
    })
    expect(sb.info.keepAliveUntil).toBeNull()
    const before = Date.now()
    const held = await sb.keepAlive(10 * LIMITS.maxKeepAliveMs)
    expect(held.keepAliveUntil).toBeGreaterThanOrEqual(before)
    expect(held.keepAliveUntil).toBeLessThanOrEqual(Date.now() + LIMITS.maxKeepAliveMs)
    expect((await sb.keepAlive(0)).keepAliveUntil).toBeNull()
    const job = await sb.startProcess('sleep 60', { keepAlive: true })
    expect(job.info.status).toBe('running')
    await job.kill()
    await expect(
      Sandbox.create({
        url: runner.url,
        apiKey: runner.apiKey,
        WebSocket: WsWebSocket,
        hibernateAfterMs: -1,
      }),
    ).rejects.toMatchObject({ code: 'BAD_REQUEST' })
  })
})
