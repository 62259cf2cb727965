// Runs written ahead into bash (run-window.ts): later lines are already in bash's stdin while
// a run executes. Interrupts, timeouts, exits, stdin, internal runs, traps and attribution
// must behave as if each run were sent alone.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, vi } from 'vitest'
import { ShellClosedError } from '../src/agent-error.ts'
import type { BashSession } from '../src/bash-session.ts'
import type { LogEvent } from '../src/log-records.ts'
import { WINDOW_LINES } from '../src/run-window.ts'
import type { RunOutcome, RunRequest } from '../src/session-run.ts'
import { nextEvent, test } from './fixtures.ts'

/** Queues runs at once (so they are written ahead) and returns their promises. */
function queue(s: BashSession, runs: (string | Omit<RunRequest, 'runId'>)[], prefix = 'w') {
  return runs.map((r, i) =>
    s.run({ runId: `${prefix}${i}`, ...(typeof r === 'string' ? { command: r } : r) }),
  )
}

const text = (o: RunOutcome) => o.stdout.toString()

/** Every log event from the start. */
function events(s: BashSession): LogEvent[] {
  const { replay, subscription } = s.log.subscribe(0, () => true)
  subscription.close()
  return replay
}

/** Resolves when the log shows output containing `needle`. */
const printed = (s: BashSession, needle: string) =>
  nextEvent(s, (e) => 'data' in e && e.data.toString().includes(needle))

describe('write-ahead: interrupt', () => {
  test('interrupts only the active run; the written-ahead runs run once each, in order, with its $?', async ({
    newSession,
    workdir,
  }) => {
    const s = await newSession()
    const count = join(workdir, 'count')
    const started = printed(s, 'a-started')
    const [a, b, c] = queue(s, [
      'echo a-started; sleep 100; echo never',
      `echo "b saw $?"; echo b >> ${count}`,
      `echo c; echo c >> ${count}`,
    ])
    await started
    expect(s.interrupt()).toBe(true)
    const ra = await a!
    expect([ra.exitCode, ra.interrupted, text(ra)]).toEqual([130, true, 'a-started\n'])
    const rb = await b!
    expect([rb.exitCode, rb.interrupted, text(rb)]).toEqual([0, false, 'b saw 130\n'])
    const rc = await c!
    expect([rc.exitCode, text(rc)]).toEqual([0, 'c\n'])
    expect(readFileSync(count, 'utf8')).toBe('b\nc\n')
  })

  test('a loop of fast children is stopped and the runs behind it each run once', async ({
    newSession,
    workdir,
  }) => {
    const s = await newSession()
    const count = join(workdir, 'count')
    const started = printed(s, 'looping')
    const later = Array.from({ length: 5 }, (_, i) => `echo ${i} >> ${count}; echo ${i}`)
    const [loop, ...rest] = queue(s, ['echo looping; while true; do /bin/true; done', ...later])
    await started
    s.interrupt()
    expect((await loop!).exitCode).toBe(130)
    const outs = await Promise.all(rest)
    expect(outs.map(text)).toEqual(['0\n', '1\n', '2\n', '3\n', '4\n'])
    expect(outs.every((o) => !o.interrupted && o.exitCode === 0)).toBe(true)
    expect(readFileSync(count, 'utf8')).toBe('0\n1\n2\n3\n4\n')
  })

  test('interrupting a queued run that is not active does nothing', async ({ newSession }) => {
    const s = await newSession()
    const started = printed(s, 'first')
    const [a, b] = queue(s, ['echo first; sleep 0.3', 'echo second'])
    await started
    expect(s.interrupt('w1')).toBe(false)
    expect([(await a!).interrupted, text(await b!)]).toEqual([false, 'second\n'])
  })

  test('attributes every byte to its own run and logs starts and exits in order', async ({ newSession }) => {
    const s = await newSession()
    // a-err is printed after a-out: once it is in, both are.
    const started = printed(s, 'a-err')
    const runs = queue(s, [
      'echo a-out; echo a-err >&2; sleep 100',
      'echo b-out; echo b-err >&2',
      'echo c-out; echo c-err >&2',
    ])
    await started
    s.interrupt()
    const outs = await Promise.all(runs)
    expect(outs.map((o) => [text(o), o.stderr.toString()])).toEqual([
      ['a-out\n', 'a-err\n'],
      ['b-out\n', 'b-err\n'],
      ['c-out\n', 'c-err\n'],
    ])
    const seen = events(s).map((e) =>
      'data' in e ? `${e.id}:${e.data.toString().trim()}` : `${e.type}:${'id' in e ? e.id : ''}`,
    )
    const order = ['shell_start:w0', 'shell_exit:w0', 'shell_start:w1', 'shell_exit:w1', 'shell_start:w2']
    expect(seen.filter((x) => x.startsWith('shell_'))).toEqual([...order, 'shell_exit:w2'])
    for (const run of ['a', 'b', 'c']) {
      const id = `w${run.charCodeAt(0) - 97}`
      expect(seen).toContain(`${id}:${run}-out`)
      expect(seen).toContain(`${id}:${run}-err`)
      const at = seen.indexOf(`${id}:${run}-out`)
      expect(at).toBeGreaterThan(seen.indexOf(`shell_start:${id}`))
      expect(at).toBeLessThan(seen.indexOf(`shell_exit:${id}`))
    }
  })
})

describe('write-ahead: timeouts, exits and errexit', () => {
  test('a run times out, the shell is kept, and the runs behind it run', async ({ newSession }) => {
    const s = await newSession()
    const [a, b, c] = queue(s, [{ command: 'sleep 100', timeoutMs: 300 }, 'echo b', 'echo c $?'])
    const ra = await a!
    expect([ra.timedOut, ra.exitCode]).toEqual([true, 130])
    expect([text(await b!), text(await c!)]).toEqual(['b\n', 'c 0\n'])
    expect(s.open).toBe(true)
  })

  test('exit in a run rejects every run written behind it as queued runs are', async ({ newSession }) => {
    const s = await newSession()
    const runs = queue(s, ['exit 3', ...Array.from({ length: WINDOW_LINES + 5 }, (_, i) => `echo ${i}`)])
    const settled = await Promise.allSettled(runs)
    for (const r of settled) {
      expect(r.status).toBe('rejected')
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(ShellClosedError)
    }
    expect(s.closedInfo?.code).toBe(3)
  })

  test('exec of another program ends the shell and rejects the runs behind it', async ({ newSession }) => {
    const s = await newSession()
    const settled = await Promise.allSettled(queue(s, ['exec true', 'echo b', 'echo c']))
    expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected'])
    expect(s.closedInfo).not.toBeNull()
  })

  test('set -e then a failure ends the shell; the runs behind it are rejected', async ({ newSession }) => {
    const s = await newSession()
    const settled = await Promise.allSettled(queue(s, ['set -e', 'false', 'echo never']))
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected'])
  })

  test('set -e survives an interrupt with runs written behind it', async ({ newSession }) => {
    const s = await newSession()
    await s.run({ runId: 'e', command: 'set -e' })
    const started = printed(s, 'sleeping')
    const [a, b] = queue(s, ['echo sleeping; sleep 100', 'echo after $-'])
    await started
    s.interrupt()
    expect((await a!).exitCode).toBe(130)
    const rb = await b!
    expect(text(rb)).toMatch(/^after .*e/)
    expect(s.open).toBe(true)
  })
})

describe('write-ahead: stdin, internal runs, history and $?', () => {
  test('each written-ahead run reads its own stdin bytes', async ({ newSession }) => {
    const s = await newSession()
    const runs = queue(
      s,
      Array.from({ length: 40 }, (_, i) => ({ command: 'cat', stdin: Buffer.from(`in-${i}`) })),
    )
    expect((await Promise.all(runs)).map(text)).toEqual(Array.from({ length: 40 }, (_, i) => `in-${i}`))
  })

  test('a stdin-pipe run between written-ahead runs gets its pipe and the order holds', async ({
    newSession,
  }) => {
    const s = await newSession()
    const [a, p, b] = queue(s, ['echo a', { command: 'cat', stdinPipe: true }, 'echo b'])
    expect(text(await a!)).toBe('a\n')
    await expect.poll(() => s.running).toBe('w1')
    s.writeStdin('w1', Buffer.from('piped'), true)
    expect(text(await p!)).toBe('piped')
    expect(text(await b!)).toBe('b\n')
  })

  test('an internal run between written-ahead runs keeps $? and stays out of history', async ({
    newSession,
  }) => {
    const s = await newSession()
    const runs = queue(s, ['(exit 7)', { command: 'echo internal', internal: true }, 'echo "saw $?"'])
    const [, internal, after] = await Promise.all(runs)
    expect(text(internal!)).toBe('internal\n')
    expect(text(after!)).toBe('saw 7\n')
    expect(s.history().map((h) => [h.command, h.exitCode])).toEqual([
      ['(exit 7)', 7],
      ['echo "saw $?"', 0],
    ])
  })

  test('an internal run is never reported as the running command; the user runs behind it count as queued', async ({
    newSession,
    workdir,
  }) => {
    const s = await newSession()
    const gate = join(workdir, 'open')
    const runs = queue(s, [
      { command: `while [ ! -e ${gate} ]; do sleep 0.01; done`, internal: true },
      'echo user',
    ])
    await vi.waitFor(() => expect(s.queued).toBe(1))
    expect(s.running).toBeNull()
    writeFileSync(gate, '')
    const [, user] = await Promise.all(runs)
    expect(text(user!)).toBe('user\n')
  })

  test('history and $? follow the order of pipelined runs', async ({ newSession }) => {
    const s = await newSession()
    const commands = Array.from({ length: 3 * WINDOW_LINES }, (_, i) => `(exit ${i % 5}); echo "$?"`)
    const outs = await Promise.all(queue(s, commands))
    expect(outs.map((o) => o.exitCode)).toEqual(commands.map(() => 0))
    expect(outs.map(text)).toEqual(commands.map((_, i) => `${i % 5}\n`))
    expect(s.history().map((h) => h.command)).toEqual(commands)
    expect(s.lastExitCode).toBe(0)
  })
})

describe('write-ahead: traps', () => {
  test('a DEBUG trap fires for the user commands of a run behind an interrupt, not for its held line', async ({
    newSession,
  }) => {
    const s = await newSession()
    await s.run({ runId: 't', command: `trap 'echo "dbg $BASH_COMMAND"' DEBUG` })
    const started = printed(s, 'dbg sleep')
    const [a, b] = queue(s, ['sleep 100', 'echo b'])
    await started
    s.interrupt()
    expect(text(await a!)).toBe('dbg sleep 100\n')
    expect(text(await b!)).toBe('dbg echo b\nb\n')
  })

  test('ERR and RETURN traps fire only for the user commands of runs behind an interrupt', async ({
    newSession,
  }) => {
    const s = await newSession()
    await s.run({ runId: 't', command: `trap 'echo err' ERR; trap 'echo ret' RETURN; f() { :; }` })
    const started = printed(s, 'sleeping')
    const [a, b, c] = queue(s, ['echo sleeping; sleep 100', 'false', 'f; . /dev/null; echo $?'])
    await started
    s.interrupt()
    expect((await a!).exitCode).toBe(130)
    const rb = await b!
    expect([text(rb), rb.exitCode]).toEqual(['err\n', 1])
    expect(text(await c!)).toBe('ret\n0\n')
  })
})
