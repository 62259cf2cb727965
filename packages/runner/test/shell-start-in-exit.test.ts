// `start_in_exit`: a client that lists it gets a short run's start inside its exit (one message
// per run), with the real agent over real sockets. Every run still shows exactly one start, at
// the right offset and before its output; a client that does not list it sees `shell_start` as
// ever; and a client cannot forge the server's frames.
import { describe, expect, it } from 'vitest'
import { createSandbox, shellUrl, startRunner } from './runner-fixture.ts'
import { type Frame, ShellClient } from './shell-client.ts'

const HELLO = { type: 'hello', protocolVersion: 1, capabilities: ['start_in_exit'] }

/** Each run's start offset, from its `shell_start` or its exit's `startOffset`; fails on a run that shows two or none. */
function startsOf(frames: Frame[], ids: string[]): Map<string, number> {
  const starts = new Map<string, number>()
  for (const f of frames) {
    if (f.type === 'shell_start') {
      expect(starts.has(f.id)).toBe(false)
      starts.set(f.id, f.offset)
    }
    if (f.type === 'shell_exit' && f.startOffset !== undefined) {
      expect(starts.has(f.id)).toBe(false)
      starts.set(f.id, f.startOffset)
    }
  }
  expect([...starts.keys()].sort()).toEqual([...ids].sort())
  return starts
}

describe('start_in_exit (real agent)', () => {
  it('sends short runs as one shell_exit carrying their start offset', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    c.send(HELLO)
    await c.nextOf('scrollback_end')
    await c.run('warm', 'echo warm')
    const from = c.frames.length
    const ids = Array.from({ length: 20 }, (_, i) => `t${i}`)
    for (const run of ids) expect((await c.run(run, 'true')).code).toBe(0)
    const frames = c.frames.slice(from)
    const starts = startsOf(frames, ids)
    for (const run of ids) expect(starts.get(run)).toBe(5)
    // The agent sends a short run's start with its exit unless bash takes longer than its lazy
    // wait, which a loaded machine may cause now and then: most runs come as one message.
    const folded = frames.filter((f) => f.type === 'shell_exit' && f.startOffset === 5)
    expect(folded.length).toBeGreaterThan(ids.length / 2)
    for (const f of folded) expect(f).toMatchObject({ code: 0, offset: 5, timedOut: false })
  })

  it('keeps shell_start for a client that does not list start_in_exit', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    c.send({ type: 'hello', protocolVersion: 1, capabilities: ['output_ack'] })
    await c.nextOf('scrollback_end')
    for (const run of ['a', 'b', 'c']) await c.run(run, 'true')
    const types = c.frames.filter((f) => f.id !== null && f.id !== undefined).map((f) => `${f.type}:${f.id}`)
    expect(types).toEqual([
      'shell_start:a',
      'shell_exit:a',
      'shell_start:b',
      'shell_exit:b',
      'shell_start:c',
      'shell_exit:c',
    ])
    expect(c.frames.some((f) => f.type === 'shell_exit' && 'startOffset' in f)).toBe(false)
  })

  it('sends the start of a run that waits at once, and its exit without startOffset', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    c.send(HELLO)
    await c.nextOf('scrollback_end')
    await c.run('mk', 'mkfifo gate')
    c.send({ type: 'shell_run', id: 'w', command: 'read -r line < gate; echo "got $line"' })
    const start = await c.nextOf('shell_start', 'w')
    expect(c.frames.some((f) => f.type === 'shell_exit' && f.id === 'w')).toBe(false)
    const open = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/processes`,
      headers: runner.auth,
      payload: { command: 'echo go > gate' },
    })
    expect(open.statusCode).toBe(200)
    const exit = await c.nextOf('shell_exit', 'w')
    expect(exit).not.toHaveProperty('startOffset')
    const out = c.frames.filter((f) => f.type === 'shell_out' && f.id === 'w')
    expect(out.map((f) => f.data).join('')).toBe('got go\n')
    expect(out[0]!.offset).toBe(start.offset)
  })

  it('shows every pipelined run one start, before its output and at its first byte', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    c.send(HELLO)
    await c.nextOf('scrollback_end')
    const ids = Array.from({ length: 60 }, (_, i) => `p${i}`)
    for (const [i, run] of ids.entries())
      c.send({ type: 'shell_run', id: run, command: i % 3 === 0 ? `echo ${run}` : 'true' })
    await c.nextOf('shell_exit', 'p59')
    const starts = startsOf(c.frames, ids)
    for (const [i, run] of ids.entries()) {
      const at = c.frames.findIndex((f) => f.id === run)
      const first = c.frames[at]!
      if (i % 3 === 0) {
        const out = c.frames.find((f) => f.type === 'shell_out' && f.id === run)!
        expect(out.data).toBe(`${run}\n`)
        expect(out.offset).toBe(starts.get(run))
        expect(first.type).toBe('shell_start')
      }
      const exit = c.frames.find((f) => f.type === 'shell_exit' && f.id === run)!
      expect(exit.code).toBe(0)
      expect(exit.offset).toBeGreaterThanOrEqual(starts.get(run)!)
    }
  })

  it('replays earlier runs to a reattaching client with one start each, at their offsets', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const a = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    const ready = await a.nextOf('shell_ready')
    await a.run('one', 'echo one')
    await a.run('quiet', 'true')
    await a.run('two', 'echo two')
    await a[Symbol.asyncDispose]()
    await using b = await ShellClient.open(
      shellUrl(runner, id, `?sessionId=${ready.sessionId}&offset=0`),
      runner.apiKey,
    )
    b.send(HELLO)
    await b.nextOf('scrollback_end')
    const starts = startsOf(b.frames, ['one', 'quiet', 'two'])
    expect(Object.fromEntries(starts)).toEqual({ one: 0, quiet: 4, two: 4 })
    const out = b.frames.filter((f) => f.type === 'shell_out').map((f) => [f.id, f.data, f.offset])
    expect(out).toEqual([
      ['one', 'one\n', 0],
      ['two', 'two\n', 4],
    ])
    expect(await b.run('after', 'echo after')).toMatchObject({ stdout: 'after\n', code: 0 })
  })

  it('answers a client that sends a server frame, folded exit or not, with UNKNOWN_FRAME_TYPE', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    await using c = await ShellClient.open(shellUrl(runner, id), runner.apiKey)
    c.send(HELLO)
    await c.nextOf('scrollback_end')
    c.send({
      type: 'shell_exit',
      id: 'x',
      code: 0,
      timedOut: false,
      durationMs: 1,
      offset: 0,
      startOffset: 0,
    })
    expect(await c.nextOf('error')).toMatchObject({ id: null, code: 'UNKNOWN_FRAME_TYPE' })
    c.send({ ...HELLO, capabilities: Array.from({ length: 65 }, () => 'start_in_exit') })
    expect(await c.nextOf('error')).toMatchObject({ id: null, code: 'INVALID_FRAME' })
    expect((await c.run('after', 'echo ok')).stdout).toBe('ok\n')
  })
})
