import { encodeFrame } from '@conch/link'
import { describe, expect } from 'vitest'
import type { AgentClient } from './agent-client.ts'
import { servedAgentTest } from './served-agent.ts'

const test = servedAgentTest({
  baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', BASE_ONLY: 'base' },
  killGraceMs: 300,
})

interface Result {
  stdout: string
  stderr: string
  exitCode: number
  timedOut: boolean
}
const text = (r: Result) => ({
  ...r,
  out: Buffer.from(r.stdout, 'base64').toString(),
  err: Buffer.from(r.stderr, 'base64').toString(),
})
let runs = 0
async function run(c: AgentClient, session: string, command: string, extra: Record<string, unknown> = {}) {
  return text(
    await c.call<Result>('session.run', {
      sessionId: session,
      id: `r${++runs}`,
      command,
      buffer: true,
      ...extra,
    }),
  )
}

describe('sessions over the agent socket', () => {
  test('creates default on demand and refuses to delete it', async ({ agent }) => {
    const c = await agent.connect()
    expect((await run(c, 'default', 'echo hi')).out).toBe('hi\n')
    await expect(c.call('session.delete', { sessionId: 'default' })).rejects.toMatchObject({
      code: 'SESSION_PROTECTED',
    })
    const list = await c.call<{ sessions: { id: string }[] }>('session.list', {})
    expect(list.sessions.map((s) => s.id)).toEqual(['default'])
  })

  test('creates a session named by a run, lists, gets and deletes it', async ({ agent }) => {
    const c = await agent.connect()
    await run(c, 'build', 'cd /; X=1')
    expect((await run(c, 'build', 'pwd; echo $X')).out).toBe('/\n1\n')
    expect(await c.call('session.get', { sessionId: 'build' })).toMatchObject({ id: 'build', status: 'open' })
    await c.call('session.delete', { sessionId: 'build' })
    await expect(c.call('session.get', { sessionId: 'build' })).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    })
  })

  test('starts from the base env or a clean env, plus the caller env and never the host env', async ({
    agent,
  }) => {
    const c = await agent.connect()
    await c.call('session.create', { id: 'inherit', env: { EXTRA: 'x' } })
    await c.call('session.create', { id: 'clean', cleanEnv: true })
    expect((await run(c, 'inherit', 'echo "$BASE_ONLY $EXTRA $PAGER"')).out).toBe('base x cat\n')
    expect((await run(c, 'clean', 'echo "[$BASE_ONLY] $PAGER"')).out).toBe('[] cat\n')
    expect((await run(c, 'inherit', 'echo "[$VITEST]"')).out).toBe('[]\n')
    await expect(c.call('session.create', { id: 'clean' })).rejects.toMatchObject({ code: 'SESSION_EXISTS' })
  })

  test('lists, gets, sets and unsets env, and keeps $? across the queries', async ({ agent }) => {
    const c = await agent.connect()
    await run(c, 's', 'export A=1; false')
    await c.call('session.env.set', { sessionId: 's', name: 'B', value: 'it\'s "two"' })
    expect(await c.call('session.env.get', { sessionId: 's', name: 'B' })).toEqual({ value: 'it\'s "two"' })
    await c.call('session.env.unset', { sessionId: 's', name: 'A' })
    const env = await c.call<{ env: Record<string, string> }>('session.env.list', { sessionId: 's' })
    expect(env.env.A).toBeUndefined()
    expect(env.env.PAGER).toBe('cat')
    expect((await run(c, 's', 'echo $? "$B"')).out).toBe('1 it\'s "two"\n')
    await run(c, 's', 'readonly R=1')
    await expect(c.call('session.env.set', { sessionId: 's', name: 'R', value: '2' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    })
  })

  test('adds, lists and removes aliases', async ({ agent }) => {
    const c = await agent.connect()
    await c.call('session.create', { id: 's' })
    await c.call('session.alias.add', { sessionId: 's', name: 'll', value: 'echo long listing' })
    expect(await c.call('session.alias.list', { sessionId: 's' })).toEqual({
      aliases: { ll: 'echo long listing' },
    })
    expect((await run(c, 's', 'll')).out).toBe('long listing\n')
    await c.call('session.alias.remove', { sessionId: 's', name: 'll' })
    await expect(c.call('session.alias.remove', { sessionId: 's', name: 'll' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    })
  })

  test('keeps a searchable history and replays an entry by index', async ({ agent }) => {
    const c = await agent.connect()
    await run(c, 'h', 'echo one')
    await run(c, 'h', 'printf two')
    await run(c, 'h', 'echo three')
    const byPrefix = await c.call<{ entries: { index: number; command: string }[] }>('session.history', {
      sessionId: 'h',
      prefix: 'echo',
    })
    expect(byPrefix.entries.map((e) => e.command)).toEqual(['echo one', 'echo three'])
    const byText = await c.call<{ entries: { index: number }[] }>('session.history', {
      sessionId: 'h',
      contains: 'two',
    })
    expect(byText.entries.map((e) => e.index)).toEqual([1])
    const replayed = text(
      await c.call<Result>('session.history.replay', { sessionId: 'h', index: 1, id: 'again' }),
    )
    expect(replayed.out).toBe('two')
    await expect(
      c.call('session.history.replay', { sessionId: 'h', index: 99, id: 'x' }),
    ).rejects.toMatchObject({ code: 'HISTORY_NOT_FOUND' })
  })

  test('streams a run on an attached channel and replays it to a second runner connection', async ({
    agent,
  }) => {
    const c = await agent.connect()
    await c.call('session.attach', { sessionId: 'default', ch: 1 })
    await c.call('session.run', {
      sessionId: 'default',
      id: 'live',
      command: 'echo streamed; exit_after=1',
      buffer: false,
    })
    const exit = await c.waitFor((f) => f.type === 'shell_exit' && f.id === 'live')
    const data = c.frames.filter((f) => f.type === 'shell_out' && f.ch === 1)
    expect(Buffer.concat(data.map((f) => f.payload)).toString()).toBe('streamed\n')
    expect(exit).toMatchObject({ code: 0, timedOut: false })
    // A new runner connection replaces the old one; the shell keeps its state and scrollback.
    const c2 = await agent.connect()
    await c2.call('session.attach', { sessionId: 'default', ch: 7, offset: 3 })
    await c2.waitFor((f) => f.type === 'scrollback_end')
    const replay = c2.frames.filter((f) => f.type === 'shell_out' && f.ch === 7)
    expect(Buffer.concat(replay.map((f) => f.payload)).toString()).toBe('eamed\n')
    expect((await run(c2, 'default', 'echo $exit_after')).out).toBe('1\n')
  })

  test('a streamed run the shell cannot take fails its call with a typed error and changes nothing else', async ({
    agent,
  }) => {
    const c = await agent.connect()
    await c.call('session.attach', { sessionId: 'default', ch: 1 })
    const streamed = (params: Record<string, unknown>) =>
      c.call('session.run', { sessionId: 'default', buffer: false, ...params })
    const refused = (params: unknown) =>
      c.call('session.run', params).then(
        () => ({ code: 'ANSWERED' }),
        (e: { code: string; message: string }) => e,
      )
    // A run that stays in flight until its stdin pipe ends.
    await expect(streamed({ id: 'held', command: 'cat', stdinPipe: true })).resolves.toEqual({})
    await c.waitFor((f) => f.type === 'shell_start' && f.id === 'held')
    expect(
      await refused({ sessionId: 'default', id: 'held', command: 'echo dup', buffer: false }),
    ).toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('already in flight'),
    })
    expect(
      await refused({ sessionId: 'default', id: 'nul', command: 'echo a\0b', buffer: false }),
    ).toMatchObject({
      code: 'INVALID_COMMAND',
    })
    for (const hostile of [
      [],
      'session.run',
      { sessionId: 'default', id: 'x', command: 42, buffer: false },
      { sessionId: 'default', id: 'x', command: 'true', buffer: 'no' },
      { sessionId: 'default', id: 'x', command: 'true', buffer: false, stdinPipe: 'yes' },
      { sessionId: 'default', id: 'x', command: 'true', buffer: false, timeoutMs: -1 },
      { sessionId: 'default', id: { toString: 'x' }, command: 'true', buffer: false },
    ]) {
      expect(await refused(hostile), JSON.stringify(hostile)).toMatchObject({ code: 'BAD_REQUEST' })
    }
    // The run in flight is unaffected: its pipe still takes input, and it ends as it should.
    await c.call('session.stdin', {
      sessionId: 'default',
      id: 'held',
      data: Buffer.from('fed\n').toString('base64'),
      end: true,
    })
    expect(await c.waitFor((f) => f.type === 'shell_exit' && f.id === 'held')).toMatchObject({ code: 0 })
    await expect(streamed({ id: 'after', command: 'echo after' })).resolves.toEqual({})
    expect(await c.waitFor((f) => f.type === 'shell_exit' && f.id === 'after')).toMatchObject({ code: 0 })
    const starts = c.frames.filter((f) => f.type === 'shell_start').map((f) => (f as { id: string }).id)
    expect(starts).toEqual(['held', 'after'])
    const out = c.frames.filter((f) => f.type === 'shell_out' && f.ch === 1)
    expect(Buffer.concat(out.map((f) => f.payload)).toString()).toBe('fed\nafter\n')
    // A streamed run naming a session that does not exist yet creates it, as before.
    await expect(streamed({ sessionId: 'fresh', id: 'f1', command: 'x=1' })).resolves.toEqual({})
    expect((await run(c, 'fresh', 'echo $x')).out).toBe('1\n')
  })

  test('answers an evicted offset with OUTPUT_LOST', async ({ agent }) => {
    const c = await agent.connect()
    await run(c, 'default', 'head -c 9000000 /dev/zero')
    await expect(c.call('session.attach', { sessionId: 'default', ch: 2, offset: 0 })).rejects.toMatchObject({
      code: 'OUTPUT_LOST',
      details: { earliestOffset: expect.any(Number) },
    })
  })

  test('sends closed on attached channels and session_closed when a shell exits', async ({ agent }) => {
    const c = await agent.connect()
    await c.call('session.attach', { sessionId: 'gone', ch: 3 }).catch(() => {})
    await c.call('session.create', { id: 'gone' })
    await c.call('session.attach', { sessionId: 'gone', ch: 3 })
    await expect(run(c, 'gone', 'exit 4')).rejects.toMatchObject({ code: 'SHELL_CLOSED' })
    expect(await c.waitFor((f) => f.type === 'shell_closed' && f.ch === 3)).toMatchObject({ code: 4 })
    expect(await c.waitFor((f) => f.type === 'session_closed')).toMatchObject({ sessionId: 'gone', code: 4 })
    await expect(run(c, 'gone', 'true')).rejects.toMatchObject({ code: 'SHELL_CLOSED' })
  })

  test('interrupts a run through the socket', async ({ agent }) => {
    const c = await agent.connect()
    await c.call('session.attach', { sessionId: 'i', ch: 4 }).catch(() => {})
    await c.call('session.create', { id: 'i' })
    await c.call('session.attach', { sessionId: 'i', ch: 4 })
    const pending = run(c, 'i', 'echo go; sleep 100')
    await c.waitFor((f) => f.type === 'shell_out' && f.ch === 4)
    await c.call('session.interrupt', { sessionId: 'i' })
    expect((await pending).exitCode).toBe(130)
  })

  test('survives random and truncated frames and keeps serving', async ({ agent }) => {
    const c = await agent.connect()
    let seed = 42
    const rand = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed
    }
    for (let i = 0; i < 300; i++) {
      const kind = i % 4
      if (kind === 0) {
        const junk = Buffer.alloc(rand() % 64)
        for (let j = 0; j < junk.length; j++) junk[j] = rand() & 0xff
        c.socket.write(
          encodeFrame({
            type: 'call',
            id: i,
            method: 'session.run',
            params: { junk: junk.toString('latin1') },
          }),
        )
      } else if (kind === 1) {
        c.socket.write(encodeFrame({ t: ['call', 'credit', 'nope', 7][rand() % 4], id: -1, ch: 'x' }))
      } else if (kind === 2) {
        const body = Buffer.from(
          JSON.stringify({ type: 'call', id: i, method: 'session.list' }).slice(0, rand() % 30),
        )
        const frame = Buffer.alloc(8 + body.length)
        frame.writeUInt32BE(4 + body.length, 0)
        frame.writeUInt32BE(body.length + (rand() % 3), 4)
        body.copy(frame, 8)
        c.socket.write(frame)
      } else {
        c.socket.write(
          encodeFrame({
            type: 'call',
            id: i,
            method: 'session.run',
            params: { sessionId: '../x', id: '', command: 1, buffer: 'no' },
          }),
        )
      }
    }
    await c.waitFor((f) => f.type === 'error')
    expect((await run(c, 'default', 'echo alive')).out).toBe('alive\n')
  })
})
