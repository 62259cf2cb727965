import { encodeOutputFrame } from '@conch/protocol'
import { test as base, describe, expect } from 'vitest'
import {
  ConnectionError,
  DeadlineError,
  OutputLostError,
  Sandbox,
  SessionNotFoundError,
  type Shell,
  ShellClosedError,
} from '../src/index.ts'
import { FakeRunner } from './fake-runner.ts'
import { defaultScript } from './fake-session.ts'

// The shell against a real WebSocket server that speaks the protocol (fake-runner.ts).

interface Fixtures {
  runner: FakeRunner
  sb: Sandbox
}

const test = base.extend<Fixtures>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
  runner: async ({}, use) => {
    await using runner = await FakeRunner.start()
    await use(runner)
  },
  sb: async ({ runner }, use) => {
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      connection: { reconnectBaseDelayMs: 10, reconnectMaxDelayMs: 50 },
    })
    await use(sb)
  },
})

/** Resolves once `predicate` holds, checking after every event-loop turn. */
async function until(predicate: () => boolean): Promise<void> {
  while (!predicate()) await new Promise((r) => setImmediate(r))
}

describe('Shell', () => {
  test('returns stdout, stderr and the exit code, resolving for a failing command', async ({ sb }) => {
    await using sh = await sb.shell()
    const ok = await sh.run('echo hello')
    expect(ok).toMatchObject({
      stdout: 'hello\n',
      stderr: '',
      exitCode: 0,
      timedOut: false,
      truncated: false,
    })
    expect(ok.stdoutBytes).toBe(6)
    const failed = await sh.run('err boom')
    expect(failed).toMatchObject({ stdout: '', stderr: 'boom\n', exitCode: 1 })
  })

  test('decodes a multi-byte character split across frames into whole characters', async ({ sb, runner }) => {
    const euro = new TextEncoder().encode('a€b') // 61 e2 82 ac 62
    runner.script = (_command, io) => {
      io.out(euro.subarray(0, 2))
      io.out(euro.subarray(2, 3))
      io.out(euro.subarray(3))
      return { code: 0 }
    }
    await using sh = await sb.shell()
    const chunks: string[] = []
    const r = await sh.run('x', { onStdout: (c) => chunks.push(c) })
    expect(r.stdout).toBe('a€b')
    expect(chunks.join('')).toBe('a€b')
    expect(chunks.every((c) => !c.includes('\uFFFD'))).toBe(true)
  })

  test('returns exact bytes with the binary encoding, invalid UTF-8 and NUL included', async ({ sb }) => {
    await using sh = await sb.shell()
    const r = await sh.run('bytes ff00fe0d0a', { encoding: 'binary' })
    expect(r.stdout).toBeInstanceOf(Uint8Array)
    expect([...r.stdout]).toEqual([0xff, 0x00, 0xfe, 0x0d, 0x0a])
  })

  test('sends stdin with the run, text or bytes', async ({ sb }) => {
    await using sh = await sb.shell()
    expect((await sh.run('cat', { stdin: 'typed\n' })).stdout).toBe('typed\n')
    expect((await sh.run('cat', { stdin: new TextEncoder().encode('bytes') })).stdout).toBe('bytes')
  })

  test('cuts a buffered result at the cap on a character boundary and reports the total', async ({
    runner,
  }) => {
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      maxOutputBytes: 4,
    })
    runner.script = (_c, io) => {
      io.out('ab€€') // 2 + 3 + 3 bytes; the cap falls inside the first €
      return { code: 0 }
    }
    await using sh = await sb.shell()
    const r = await sh.run('x')
    expect(r).toMatchObject({ stdout: 'ab', truncated: true, stdoutBytes: 8 })
  })

  test('pipelines concurrent runs: all are on the wire before the first finishes', async ({ sb, runner }) => {
    await using sh = await sb.shell()
    const session = runner.session(sh.sessionId)
    runner.script = async (command, io) => {
      // The first run holds the shell until every run has arrived; without pipelining this never happens.
      if (command === 'echo 0') await until(() => session.received.length === 100)
      io.out(`${command.slice(5)}\n`)
      return { code: 0 }
    }
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => sh.run(`echo ${i}`)))
    expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 100 }, (_, i) => `${i}\n`))
    expect(session.maxQueued).toBeGreaterThanOrEqual(99)
  })

  test('streams output events and then one exit event', async ({ sb, runner }) => {
    runner.script = (_c, io) => {
      io.out('one\n')
      io.err('two\n')
      io.out('three\n')
      return { code: 3 }
    }
    await using sh = await sb.shell()
    const events = []
    for await (const ev of sh.stream('x')) events.push(ev)
    expect(events).toEqual([
      { type: 'stdout', data: 'one\n' },
      { type: 'stderr', data: 'two\n' },
      { type: 'stdout', data: 'three\n' },
      { type: 'exit', exitCode: 3, timedOut: false, oomKilled: false, durationMs: expect.any(Number) },
    ])
  })

  test('sends no acks to a runner without output_ack, and a slow reader still gets every byte', async ({
    sb,
    runner,
  }) => {
    const chunk = new Uint8Array(64 * 1024).fill(0x61)
    runner.script = (_c, io) => {
      for (let i = 0; i < 64; i++) io.out(chunk)
      return { code: 0 }
    }
    await using sh = await sb.shell()
    let bytes = 0
    let held = 0
    for await (const ev of sh.stream('x', { encoding: 'binary' })) {
      held = Math.max(held, sh.bufferedBytes)
      if (ev.type === 'stdout') bytes += ev.data.length
      await new Promise((r) => setTimeout(r, 1))
    }
    expect(bytes).toBe(64 * chunk.length)
    // Without the capability the reader cannot slow the runner: the output waits in the client.
    expect(held).toBeGreaterThan(32 * chunk.length)
    expect(runner.clientFrameTypes).not.toContain('ack')
    expect(sh.bufferedBytes).toBe(0)
  })

  test('reads output from binary frames when the runner has binary_output, losslessly', async ({
    sb,
    runner,
  }) => {
    runner.binaryOutput = true
    runner.script = (_c, io) => {
      io.out(new Uint8Array([0, 0xff, 0xe2]))
      io.out(new Uint8Array([0x82, 0xac]))
      io.err('e')
      return { code: 0 }
    }
    await using sh = await sb.shell()
    const chunks: string[] = []
    const text = await sh.run('x', { onStdout: (c) => chunks.push(c) })
    expect(text).toMatchObject({ stdout: '\u0000\ufffd€', stderr: 'e', exitCode: 0 })
    expect(chunks.join('')).toBe('\u0000\ufffd€')
    const bytes = await sh.run('x', { encoding: 'binary' })
    expect(bytes.stdout).toEqual(new Uint8Array([0, 0xff, 0xe2, 0x82, 0xac]))
    expect(sh.offset).toBe(12)
  })

  test('hands a large binary frame to text callbacks in pieces of at most 64 KiB, characters whole', async ({
    sb,
    runner,
  }) => {
    runner.binaryOutput = true
    // One 256 KiB frame (the largest output frame) with a 3-byte character across every 64 KiB cut.
    const big = new Uint8Array(256 * 1024).fill(0x61)
    for (let cut = 64 * 1024; cut < big.length; cut += 64 * 1024) big.set([0xe2, 0x82, 0xac], cut - 1)
    runner.script = (_c, io) => {
      io.out(big)
      return { code: 0 }
    }
    await using sh = await sb.shell()
    const chunks: string[] = []
    const r = await sh.run('x', { onStdout: (c) => chunks.push(c) })
    const expected = new TextDecoder().decode(big)
    expect(r.stdout).toBe(expected)
    expect(chunks.join('')).toBe(expected)
    expect(chunks.length).toBeGreaterThanOrEqual(4)
    // No piece is longer than 64 KiB of input: V8 keeps such strings in its young generation.
    for (const c of chunks) expect(Buffer.byteLength(c)).toBeLessThanOrEqual(64 * 1024 + 2)
    // A stream reader that takes its time still gets every byte, and the offset covers the frame.
    const streamed: string[] = []
    for await (const ev of sh.stream('x')) {
      if (ev.type === 'stdout') streamed.push(ev.data)
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(streamed.join('')).toBe(expected)
    expect(sh.bufferedBytes).toBe(0)
  })

  test('closes with INVALID_FRAME on a binary frame with a truncated header, a wrong kind or a bad id length', async ({
    runner,
  }) => {
    const good = encodeOutputFrame('stdout', 'r1', 0, new Uint8Array([1]))
    const kind = good.slice()
    kind[0] = 7
    const length = good.slice()
    new DataView(length.buffer).setUint16(1, 9_000)
    for (const bad of [good.subarray(0, 4), kind, length]) {
      await using sb = await Sandbox.connect(runner.sandboxId, { url: runner.url, apiKey: runner.apiKey })
      await using sh = await sb.shell()
      const pending = sh.run('hang')
      await until(() => runner.connections > 0)
      runner.sendBinary(bad)
      await expect(pending).rejects.toMatchObject({ code: 'INVALID_FRAME' })
      expect(sh.isOpen).toBe(false)
    }
  })

  test('interrupts the command when the stream consumer stops early', async ({ sb, runner }) => {
    runner.script = async (command, io, session) => {
      if (command !== 'x') return defaultScript(command, io, session)
      io.out('first\n')
      await io.interrupted
      return { code: 130 }
    }
    await using sh = await sb.shell()
    for await (const ev of sh.stream('x')) {
      expect(ev).toEqual({ type: 'stdout', data: 'first\n' })
      break
    }
    expect((await sh.run('echo next')).stdout).toBe('next\n')
  })

  test('closes with INVALID_FRAME instead of hanging when the runner sends a frame it cannot read', async ({
    sb,
    runner,
  }) => {
    await using sh = await sb.shell()
    const pending = sh.run('hang')
    await until(() => runner.session(sh.sessionId).running !== null)
    runner.sendRaw('{"type":"shell_exit","id":"x","code":999}')
    const err = await pending.catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'INVALID_FRAME' })
    expect(String(err)).toContain('incompatible')
  })

  test('resolves runs whose start comes inside their exit (start_in_exit)', async ({ sb, runner }) => {
    runner.startInExit = true
    await using sh = await sb.shell()
    const results = await Promise.all([sh.run('true'), sh.run('code 3'), sh.run('echo hi'), sh.run('true')])
    expect(results.map((r) => [r.exitCode, r.stdout])).toEqual([
      [0, ''],
      [3, ''],
      [0, 'hi\n'],
      [0, ''],
    ])
    expect(runner.foldedExits).toBe(3)
    expect(sh.offset).toBe(3)
    expect((await sh.run('echo after')).stdout).toBe('after\n')
  })

  test.for([
    ['a negative startOffset', '-1'],
    ['a fractional startOffset', '1.5'],
    ['a string startOffset', '"0"'],
    ['a startOffset past 2^53', '9007199254740993'],
    ['a null startOffset', 'null'],
  ])('closes with INVALID_FRAME on a shell_exit with %s', async ([_what, value], { sb, runner }) => {
    await using sh = await sb.shell()
    const pending = sh.run('hang')
    await until(() => runner.session(sh.sessionId).running !== null)
    runner.sendRaw(
      `{"type":"shell_exit","id":"x","code":0,"timedOut":false,"durationMs":1,"offset":0,"startOffset":${value}}`,
    )
    await expect(pending).rejects.toMatchObject({ code: 'INVALID_FRAME' })
  })

  test('interrupts the running command', async ({ sb, runner }) => {
    await using sh = await sb.shell()
    const pending = sh.run('sleep 60000')
    await until(() => runner.session(sh.sessionId).running !== null)
    await sh.interrupt()
    expect((await pending).exitCode).toBe(130)
  })

  test('rejects with the abort reason and interrupts the command when the signal aborts', async ({
    sb,
    runner,
  }) => {
    await using sh = await sb.shell()
    const controller = new AbortController()
    const pending = sh.run('sleep 60000', { signal: controller.signal })
    await until(() => runner.session(sh.sessionId).running !== null)
    controller.abort(new Error('user gave up'))
    await expect(pending).rejects.toThrow('user gave up')
    expect((await sh.run('echo after')).stdout).toBe('after\n')
  })

  test('rejects the pending run and every later run with ShellClosedError after exit', async ({ sb }) => {
    await using sh = await sb.shell()
    const err = await sh.run('exit 7').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ShellClosedError)
    expect(err).toMatchObject({ code: 'SHELL_CLOSED', exitCode: 7, signal: null })
    await expect(sh.run('echo no')).rejects.toBeInstanceOf(ShellClosedError)
    expect(sh.isOpen).toBe(false)
  })

  test('resumes from the last offset after a drop, so the in-flight run completes exactly', async ({
    sb,
    runner,
  }) => {
    let release = () => {}
    const released = new Promise<void>((r) => {
      release = r
    })
    runner.script = async (_c, io) => {
      io.out('before-')
      await released
      io.out('after')
      return { code: 0 }
    }
    await using sh = await sb.shell()
    const seen: string[] = []
    const pending = sh.run('x', { onStdout: (c) => seen.push(c) })
    await until(() => seen.length === 1)
    runner.dropClients()
    release() // output written while no client is attached
    const r = await pending
    expect(r.stdout).toBe('before-after')
    expect(seen.join('')).toBe('before-after')
    expect(runner.connections).toBe(2)
    expect(runner.shellUrls[1]).toContain('offset=7')
    expect(sh.offset).toBe(12)
  })

  test('sends a run again after a reconnect when the runner never received it', async ({ sb, runner }) => {
    await using sh = await sb.shell()
    runner.loseNextRun = true
    const r = await sh.run('echo resent')
    expect(r.stdout).toBe('resent\n')
    expect(runner.session(sh.sessionId).received).toHaveLength(1)
  })

  test('fails the in-flight run with OutputLostError when its output was evicted', async ({ sb, runner }) => {
    let release = () => {}
    const released = new Promise<void>((r) => {
      release = r
    })
    runner.script = async (command, io, session) => {
      if (command !== 'x') return defaultScript(command, io, session)
      io.out('early')
      await released
      io.out('late')
      return { code: 0 }
    }
    await using sh = await sb.shell()
    const seen: string[] = []
    const pending = sh.run('x', { onStdout: (c) => seen.push(c) })
    await until(() => seen.length === 1)
    const session = runner.session(sh.sessionId)
    runner.silent = true // the client misses what follows
    release()
    await until(() => session.running === null)
    session.evict(session.offset)
    runner.silent = false
    runner.dropClients()
    const err = await pending.catch((e: unknown) => e)
    expect(err).toBeInstanceOf(OutputLostError)
    expect(err).toMatchObject({ code: 'OUTPUT_LOST', earliestOffset: 9 })
    expect((await sh.run('echo fine')).stdout).toBe('fine\n')
  })

  test('reconnects when the runner goes silent, detected by heartbeats', async ({ runner }) => {
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      connection: { heartbeatIntervalMs: 40, connectTimeoutMs: 200, reconnectBaseDelayMs: 10 },
    })
    await using sh = await sb.shell()
    runner.silent = true
    const pending = sh.run('echo through')
    await until(() => runner.connections === 1 && runner.shellUrls.length === 1)
    // The first socket stays open but silent; the heartbeat drops it and the shell reconnects.
    await until(() => runner.connections >= 2)
    runner.silent = false
    expect((await pending).stdout).toBe('through\n')
    expect(runner.connections).toBeGreaterThanOrEqual(2)
  })

  test('gives up on a started run whose end never comes, with DeadlineError', async ({ runner }) => {
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      connection: { runDeadlineGraceMs: 20 },
    })
    await using sh = await sb.shell()
    const err = await sh.run('hang', { timeoutMs: 1_000 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(DeadlineError)
    expect(String(err)).toContain(sh.sessionId)
  })

  test('gives up with ConnectionError when the runner stays away', async ({ runner }) => {
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      connection: { maxReconnectAttempts: 2, reconnectBaseDelayMs: 5 },
    })
    const sh = await sb.shell()
    const pending = sh.run('sleep 60000')
    await until(() => runner.session(sh.sessionId).running !== null)
    await runner[Symbol.asyncDispose]()
    const err = await pending.catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConnectionError)
    expect(err).toMatchObject({ code: 'CONNECTION_LOST' })
  })

  test('reattaches by session id and replays output from an offset to onOutput', async ({ sb }) => {
    await using first = await sb.shell()
    await first.run('echo one')
    const replayed: string[] = []
    const second: Shell = await sb.reattachShell(first.sessionId, {
      offset: 0,
      onOutput: (o) => replayed.push(new TextDecoder().decode(o.data)),
    })
    expect(replayed).toEqual(['one\n'])
    expect((await second.run('echo two')).stdout).toBe('two\n')
    second.close()
  })

  test('rejects reattaching to a missing session with SessionNotFoundError', async ({ sb }) => {
    await expect(sb.reattachShell('nope')).rejects.toBeInstanceOf(SessionNotFoundError)
  })

  test('deletes its session when disposed', async ({ sb, runner }) => {
    let id = ''
    {
      await using sh = await sb.shell()
      id = sh.sessionId
      expect(runner.sessions.has(id)).toBe(true)
    }
    expect(runner.sessions.has(id)).toBe(false)
  })
})

describe('Shell on an injected WebSocket', () => {
  test('runs over the ws package passed as the WebSocket option', async ({ runner }) => {
    const { WebSocket } = await import('ws')
    await using sb = await Sandbox.connect(runner.sandboxId, {
      url: runner.url,
      apiKey: runner.apiKey,
      WebSocket,
    })
    await using sh = await sb.shell()
    expect((await sh.run('echo via-ws')).stdout).toBe('via-ws\n')
  })
})
