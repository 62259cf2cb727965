// The shell WebSocket with the real agent over real sockets: reattach mid-run, resume from an
// offset, eviction, interrupt, shell close, and a slow client that must not grow runner memory.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LIMITS } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { generateApiKey } from '../src/credentials.ts'
import { createSandbox, shellUrl, startRunner, type TestRunner } from './runner-fixture.ts'
import { destroyStateDir, rssOf, runnerProcess } from './runner-process.ts'
import { ShellClient } from './shell-client.ts'

describe('shell socket (real agent)', () => {
  it('keeps shell state across runs and queues runs from one client in order', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    await c.nextOf('scrollback_end')
    expect(await c.run('a', 'cd /tmp && X=1')).toMatchObject({ code: 0 })
    c.send({ type: 'shell_run', id: 'b', command: 'echo $X; pwd' })
    c.send({ type: 'shell_run', id: 'c', command: 'echo third' })
    await c.nextOf('shell_exit', 'c')
    const starts = c.frames.filter((f) => f.type === 'shell_start').map((f) => f.id)
    expect(starts).toEqual(['a', 'b', 'c'])
    const out = (id: string) =>
      c.frames
        .filter((f) => f.type === 'shell_out' && f.id === id)
        .map((f) => f.data)
        .join('')
    expect(out('b')).toBe('1\n/tmp\n')
    expect(out('c')).toBe('third\n')
  })

  it('lets a second client reattach mid-run and see the rest of the run after the first disconnects', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const a = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    const ready = await a.nextOf('shell_ready')
    a.send({
      type: 'shell_run',
      id: 'long',
      command: 'mkfifo gate; echo before; read -r line < gate; echo after',
    })
    const first = await a.nextOf('shell_out', 'long')
    expect(first.data).toBe('before\n')
    await a[Symbol.asyncDispose]()

    await using b = await ShellClient.open(
      shellUrl(runner, id, `?sessionId=${ready.sessionId}&offset=0`),
      runner.apiKey,
    )
    const readyB = await b.nextOf('shell_ready')
    expect(readyB).toMatchObject({ sessionId: ready.sessionId, running: 'long' })
    expect(await b.nextOf('shell_out', 'long')).toMatchObject({ data: 'before\n', offset: 0 })
    await b.nextOf('scrollback_end')
    const open = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/processes`,
      headers: runner.auth,
      payload: { command: 'echo go > gate' },
    })
    expect(open.statusCode).toBe(200)
    expect(await b.nextOf('shell_out', 'long')).toMatchObject({ data: 'after\n' })
    expect(await b.nextOf('shell_exit', 'long')).toMatchObject({ code: 0 })
  })

  it('resumes from a byte offset with only the output after it', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using a = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    const ready = await a.nextOf('shell_ready')
    await a.run('r1', 'echo one')
    const exit = await a.run('r2', 'echo two')
    expect(exit.stdout).toBe('two\n')
    await using b = await ShellClient.open(
      shellUrl(runner, id, `?sessionId=${ready.sessionId}&offset=4`),
      runner.apiKey,
    )
    await b.nextOf('shell_ready')
    const end = await b.nextOf('scrollback_end')
    const replayed = b.frames.filter((f) => f.type === 'shell_out')
    expect(replayed.map((f) => f.data).join('')).toBe('two\n')
    expect(replayed[0]).toMatchObject({ id: 'r2', offset: 4 })
    expect(end.offset).toBe(8)
  })

  it('answers a resume from an evicted offset with OUTPUT_LOST and the earliest offset', async () => {
    await using runner = await startRunner({ listen: true, limits: { scrollbackBytes: 4096 } })
    const id = await createSandbox(runner)
    await using a = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    const ready = await a.nextOf('shell_ready')
    await a.run('big', 'head -c 20000 /dev/zero | tr "\\0" x')
    await using b = await ShellClient.open(
      shellUrl(runner, id, `?sessionId=${ready.sessionId}&offset=0`),
      runner.apiKey,
    )
    const error = await b.nextOf('error')
    expect(error.code).toBe('OUTPUT_LOST')
    expect(Number((error.details as { earliestOffset: number }).earliestOffset)).toBeGreaterThan(0)
    expect((await b.closed).code).toBe(4410)
  })

  it('interrupts the running command and keeps the shell', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    await c.nextOf('scrollback_end')
    c.send({ type: 'shell_run', id: 'sleepy', command: 'echo z; sleep 60' })
    await c.nextOf('shell_out', 'sleepy')
    c.send({ type: 'shell_interrupt' })
    expect(await c.nextOf('shell_exit', 'sleepy')).toMatchObject({ code: 130 })
    expect(await c.run('after', 'echo alive')).toMatchObject({ stdout: 'alive\n' })
  })

  it('sends shell_closed to every client when bash exits and fails later runs with SHELL_CLOSED', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using a = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    const ready = await a.nextOf('shell_ready')
    await using b = await ShellClient.open(
      shellUrl(runner, id, `?sessionId=${ready.sessionId}`),
      runner.apiKey,
    )
    await b.nextOf('scrollback_end')
    a.send({ type: 'shell_run', id: 'bye', command: 'exit 7' })
    expect(await a.nextOf('shell_closed')).toMatchObject({ code: 7 })
    expect(await b.nextOf('shell_closed')).toMatchObject({ code: 7 })
    a.send({ type: 'shell_run', id: 'later', command: 'true' })
    expect(await a.nextOf('error', 'later')).toMatchObject({ code: 'SHELL_CLOSED' })
  })

  it('keeps runner memory bounded while a paused client falls behind a large output', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-slow-'))
    const apiKey = generateApiKey()
    try {
      await using runner = await runnerProcess(stateDir, apiKey)
      const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
      const created = await fetch(`${runner.url}/v1/sandboxes`, { method: 'POST', headers, body: '{}' })
      const { id } = (await created.json()) as { id: string }
      const ws = `${runner.url.replace('http', 'ws')}/v1/sandboxes/${id}/shell`
      await using c = await ShellClient.open(ws, apiKey)
      const ready = await c.nextOf('shell_ready')
      await c.nextOf('scrollback_end')
      const baseline = await rssOf(runner.child.pid!)
      const total = 128 * 1024 * 1024
      c.ws.pause()
      c.send({ type: 'shell_run', id: 'flood', command: `head -c ${total} /dev/zero | tr '\\0' a` })
      // Wait until the agent's log stops growing: the command is held back by credit.
      let last = -1
      let stable = 0
      await vi.waitFor(
        async () => {
          const res = await fetch(`${runner.url}/v1/sandboxes/${id}/sessions/${ready.sessionId}`, { headers })
          const { offset } = (await res.json()) as { offset: number }
          stable = offset === last && offset > 0 ? stable + 1 : 0
          last = offset
          expect(stable).toBeGreaterThanOrEqual(5)
        },
        { timeout: 60_000, interval: 100 },
      )
      expect(last).toBeLessThan(total / 4)
      const grown = (await rssOf(runner.child.pid!)) - baseline
      expect(grown).toBeLessThan(64 * 1024 * 1024)
      c.ws.resume()
      const exit = await c.nextOf('shell_exit', 'flood')
      expect(exit).toMatchObject({ code: 0, offset: total })
      const bytes = c.frames
        .filter((f) => f.type === 'shell_out' && f.id === 'flood')
        .reduce((n, f) => n + String(f.data).length, 0)
      expect(bytes).toBe(total)
    } finally {
      await destroyStateDir(stateDir)
    }
  }, 60_000)

  describe('output_ack: a client that acknowledges output sets the pace', () => {
    const WINDOW = LIMITS.minClientWindowBytes
    /** Everything the agent may send past the client's last ack: its window, the channel's, one chunk. */
    const BOUND = WINDOW + LIMITS.channelWindowBytes + LIMITS.maxDataChunkBytes
    const TOTAL = 64 * 1024 * 1024

    /** Output bytes of run `id` received so far (utf8 text of ASCII, so one char per byte). */
    const received = (c: ShellClient, id: string): number =>
      c.frames
        .filter((f) => f.type === 'shell_out' && f.id === id)
        .reduce((n, f) => n + String(f.data).length, 0)

    /** A command writing TOTAL bytes of `a`, noting its writer's pid in `writer.pid`. */
    const FLOOD = `head -c ${TOTAL} /dev/zero | { echo $BASHPID > writer.pid; exec tr '\\0' a; }`

    /** Kernel wait channels of a write blocked on a full pipe or unix socket (bash's stdout). */
    const BLOCKED_IN_WRITE = /pipe_write|sock_alloc_send_pskb|unix_stream_sendmsg/

    /** Resolves once the writer in the sandbox is blocked writing to its full pipe (or the run ended). */
    async function writerBlocked(runner: TestRunner, id: string, c: ShellClient, run: string): Promise<void> {
      await vi.waitFor(
        async () => {
          if (c.frames.some((f) => f.type === 'shell_exit' && f.id === run)) return
          const res = await runner.app.inject({
            method: 'POST',
            url: `/v1/sandboxes/${id}/exec`,
            headers: runner.auth,
            payload: { command: 'cat /proc/$(cat writer.pid)/wchan' },
          })
          expect(res.json<{ stdout: string }>().stdout).toMatch(BLOCKED_IN_WRITE)
        },
        { timeout: 60_000, interval: 50 },
      )
    }

    it('stops the command while a client that never acknowledges has a window of output unacknowledged', async () => {
      await using runner = await startRunner({ listen: true })
      const id = await createSandbox(runner)
      await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
      c.send({ type: 'hello', protocolVersion: 1, capabilities: ['output_ack'], windowBytes: WINDOW })
      await c.nextOf('scrollback_end')
      c.send({ type: 'shell_run', id: 'flood', command: FLOOD, timeoutMs: 600_000 })
      await c.nextOf('shell_out', 'flood')
      await writerBlocked(runner, id, c, 'flood')
      expect(c.frames.some((f) => f.type === 'shell_exit')).toBe(false)
      const stalled = received(c, 'flood')
      expect(stalled).toBeLessThanOrEqual(BOUND)

      // An ack far past what was sent counts as an ack of what was sent (at most BOUND): one
      // bound more, then the command stops again.
      c.send({ type: 'ack', offset: Number.MAX_SAFE_INTEGER })
      await c.next((f) => f.type === 'shell_out' && Number(f.offset) >= stalled)
      await writerBlocked(runner, id, c, 'flood')
      expect(c.frames.some((f) => f.type === 'shell_exit')).toBe(false)
      expect(received(c, 'flood')).toBeGreaterThan(stalled)
      expect(received(c, 'flood')).toBeLessThanOrEqual(2 * BOUND)
    }, 120_000)

    it('delivers the exact output to a client that acknowledges what it reads', async () => {
      await using runner = await startRunner({ listen: true })
      const id = await createSandbox(runner)
      await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
      c.send({ type: 'hello', protocolVersion: 1, capabilities: ['output_ack'], windowBytes: WINDOW })
      await c.nextOf('scrollback_end')
      c.ws.on('message', () => {
        const last = c.frames.at(-1)
        if (last?.type === 'shell_out')
          c.send({ type: 'ack', offset: Number(last.offset) + String(last.data).length })
      })
      c.send({ type: 'shell_run', id: 'flood', command: FLOOD, timeoutMs: 600_000 })
      expect(await c.nextOf('shell_exit', 'flood')).toMatchObject({ code: 0, offset: TOTAL })
      expect(received(c, 'flood')).toBe(TOTAL)
      const frames = c.frames.filter((f) => f.type === 'shell_out' && f.id === 'flood')
      const text = frames.map((f) => String(f.data)).join('')
      expect(/^a*$/.test(text)).toBe(true)
      // The agent's frames may hold up to 256 KiB; a JSON frame still carries at most 64 KiB, at
      // the offset of its own first byte.
      let at = 0
      for (const f of frames) {
        expect(String(f.data).length).toBeLessThanOrEqual(64 * 1024)
        expect(f.offset).toBe(at)
        at += String(f.data).length
      }
    }, 120_000)

    it('ignores acks from a client that did not ask for output_ack', async () => {
      await using runner = await startRunner({ listen: true })
      const id = await createSandbox(runner)
      await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
      await c.nextOf('scrollback_end')
      c.send({ type: 'ack', offset: 0 })
      c.send({ type: 'shell_run', id: 'flood', command: `head -c ${8 * WINDOW} /dev/zero | tr '\\0' a` })
      expect(await c.nextOf('shell_exit', 'flood')).toMatchObject({ code: 0, offset: 8 * WINDOW })
      expect(c.frames.some((f) => f.type === 'error')).toBe(false)
    }, 60_000)
  })
})
