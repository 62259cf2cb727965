import { describe, expect } from 'vitest'
import type { AgentClient } from './agent-client.ts'
import { servedAgentTest } from './served-agent.ts'

// Interactive stdin for shell runs: a run started with `stdinPipe` reads a FIFO that
// `session.stdin` feeds while it is in flight; the default stays /dev/null.

const test = servedAgentTest({ maxTerminals: 3 })

interface Result {
  stdout: string
  exitCode: number
  timedOut: boolean
}
const out = (r: Result) => Buffer.from(r.stdout, 'base64').toString()
const b64 = (s: string) => Buffer.from(s).toString('base64')

/** Starts a buffered run with a stdin pipe and waits until it is the running one. */
async function startPiped(c: AgentClient, run: string, command: string, timeoutMs = 30_000) {
  const result = c.call<Result>('session.run', {
    sessionId: 'default',
    id: run,
    command,
    buffer: true,
    stdinPipe: true,
    timeoutMs,
  })
  for (;;) {
    const info = await c.call<{ running: string | null }>('session.get', { sessionId: 'default' })
    // Wrapped: an async function returning the promise itself would wait for the run to end.
    if (info.running === run) return { result }
  }
}

describe('interactive stdin for shell runs', () => {
  test("answers read -p 'name? ' through the run, line by line, then EOF ends a cat", async ({ agent }) => {
    const c = await agent.connect()
    const hi = await startPiped(c, 'r1', "read -p 'name? ' n; echo hi $n")
    await c.call('session.stdin', { sessionId: 'default', id: 'r1', data: b64('bob\n') })
    expect(out(await hi.result)).toBe('hi bob\n')

    const cat = await startPiped(c, 'r2', 'cat; echo "[eof]"')
    await c.call('session.stdin', { sessionId: 'default', id: 'r2', data: b64('one\n') })
    await c.call('session.stdin', { sessionId: 'default', id: 'r2', data: b64('two\n'), end: true })
    expect(out(await cat.result)).toBe('one\ntwo\n[eof]\n')
    // The shell carries on, and a run without a pipe still reads /dev/null.
    const plain = await c.call<Result>('session.run', {
      sessionId: 'default',
      id: 'r3',
      command: 'cat; echo done',
      buffer: true,
    })
    expect(out(plain)).toBe('done\n')
  })

  test('attacks: stdin to a run that is not piped, not running, or already ended; a run waiting on input times out', async ({
    agent,
  }) => {
    const c = await agent.connect()
    await expect(
      c.call('session.stdin', { sessionId: 'default', id: 'nope', data: b64('x') }),
    ).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    const waiting = await startPiped(c, 'w1', 'read line; echo got-$line', 1_000)
    await c.call('session.stdin', { sessionId: 'default', id: 'w1', end: true })
    await expect(
      c.call('session.stdin', { sessionId: 'default', id: 'w1', data: b64('late') }),
    ).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    expect(out(await waiting.result)).toBe('got-\n')

    const stuck = await startPiped(c, 'w2', 'read line; echo never', 1_000)
    const r = await stuck.result
    expect(r.timedOut).toBe(true)
    await expect(
      c.call('session.stdin', { sessionId: 'default', id: 'w2', data: b64('x') }),
    ).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    // A command that never reads: input past the agent's bound is refused, not buffered forever.
    const deaf = await startPiped(c, 'w3', 'sleep 30', 30_000)
    const chunk = b64('x'.repeat(700_000))
    let refused: unknown = null
    for (let i = 0; i < 4 && refused === null; i++) {
      await c.call('session.stdin', { sessionId: 'default', id: 'w3', data: chunk }).catch((e: unknown) => {
        refused = e
      })
    }
    expect(refused).toMatchObject({ code: 'RATE_LIMITED' })
    await c.call('session.interrupt', { sessionId: 'default', id: 'w3' })
    await deaf.result
  })
})
