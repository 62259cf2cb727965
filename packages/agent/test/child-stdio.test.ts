// Children's stdout and stderr are real pipes and an exec's stdin bytes a file (child-stdio.ts):
// a command can open `/dev/stdout`, `/dev/stderr` and `/dev/stdin` as in a terminal or a shell
// pipeline, in a session's run, an exec and a background process. Attacks, from a shell running as the sandbox user: it cannot
// read an output pipe back (its own or another session's, through /proc), cannot reach the
// stock of pipes by name, and holds no pipe of another child. Where no pipe can be made, the
// child gets a socket and no output is lost.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect } from 'vitest'
import { BackgroundProcesses } from '../src/background-processes.ts'
import type { BashSession } from '../src/bash-session.ts'
import { ChildStdio, childStdioSpawn } from '../src/child-stdio.ts'
import { systemClock } from '../src/clock.ts'
import { type Logger, silentLogger } from '../src/logger.ts'
import { startExec } from '../src/one-shot-exec.ts'
import { nodeSpawn, sandboxSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'
import { childStdio, pipeSpawn, sh, test } from './fixtures.ts'

/** `nobody`: a user other than the agent's, as drivers run shells. */
const SANDBOX = { uid: 65534, gid: 65534 }

/** A directory every user may use, for the sandbox user's sessions. */
const shared = mkdtempSync(join(tmpdir(), 'conch-outpipes-'))
chmodSync(shared, 0o777)
const sandboxPipes = new ChildStdio(chooseTempRoot(), silentLogger, SANDBOX.gid)
afterAll(() => {
  sandboxPipes.dispose()
  rmSync(shared, { recursive: true, force: true })
})

/** A session whose bash runs as the sandbox user, with pipes the agent gives such a shell. */
function sandboxSession(newSession: (o: object) => Promise<BashSession>): Promise<BashSession> {
  if (process.getuid?.() !== 0) throw new Error('these tests start bash as another user: run them as root')
  return newSession({
    spawn: childStdioSpawn(sandboxSpawn(nodeSpawn, SANDBOX, [], silentLogger), sandboxPipes),
    sandboxGid: SANDBOX.gid,
    cwd: shared,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: shared, LANG: 'C.UTF-8' },
  })
}

/** Writes through the paths a terminal offers: /dev/stdout, /dev/stderr, tee and /proc/self/fd. */
const WRITE_BY_PATH =
  'echo out > /dev/stdout; echo err > /dev/stderr; printf tee | tee /dev/stderr; echo fd1 > /proc/self/fd/1'

describe('output pipes: a command opens its stdout and stderr by path', () => {
  test('in a session run, as the agent user and as the sandbox user', async ({ newSession }) => {
    for (const s of [await newSession(), await sandboxSession(newSession)]) {
      const r = await sh(s, WRITE_BY_PATH)
      expect(r).toMatchObject({ out: 'out\nteefd1\n', err: 'err\ntee', exitCode: 0 })
      // The run's framing still holds: the next run ends on its own marker with its own output.
      expect((await sh(s, 'echo next')).out).toBe('next\n')
    }
  })

  test('in an exec and a background process', async () => {
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
    const exec = await startExec(
      { command: WRITE_BY_PATH, cwd: shared, env, timeoutMs: 10_000 },
      pipeSpawn,
      systemClock,
    ).done
    expect(exec.stdout.bytes().toString()).toBe('out\nteefd1\n')
    expect(exec.stderr.bytes().toString()).toBe('err\ntee')
    expect(exec.exitCode).toBe(0)
    const table = new BackgroundProcesses(pipeSpawn, systemClock, 4, 4096)
    const p = table.start({ command: WRITE_BY_PATH, cwd: shared, env })
    expect(await table.wait(p.id)).toMatchObject({ status: 'exited', exitCode: 0 })
    const output = table.output(p.id)
    expect(output.stdout.toString()).toBe('out\nteefd1\n')
    expect(output.stderr.toString()).toBe('err\ntee')
  })

  test("a child's end blocks as a command expects, so a slow reader costs no write error", async ({
    newSession,
  }) => {
    const s = await newSession()
    // O_NONBLOCK is 04000 in fdinfo's octal flags; a non-blocking stdout makes writers fail EAGAIN.
    const r = await sh(s, "for fd in 1 2; do awk '/^flags/ { print $2 }' /proc/self/fdinfo/$fd; done")
    for (const flags of r.out.trim().split('\n')) expect(Number.parseInt(flags, 8) & 0o4000).toBe(0)
    // 900 KB: many times a pipe's 64 KiB, within a buffered run's 1 MiB cap.
    const big = await sh(s, 'head -c 900000 /dev/zero | tr "\\0" x > /dev/stdout; echo " $?"')
    expect(big.out).toBe(`${'x'.repeat(900_000)} 0\n`)
    expect(big.err).toBe('')
  })
})

describe('an exec with stdin bytes: a file its command reopens', () => {
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
  const stdin = Buffer.from('in\n')
  // Each open reads from the start, as bash's here-strings do; fd 0 itself is read last.
  const READ_BY_PATH = 'cat /dev/stdin; wc -c < /proc/self/fd/0; cat'

  test('as the agent user and as the sandbox user', async () => {
    const asSandbox = childStdioSpawn(sandboxSpawn(nodeSpawn, SANDBOX, [], silentLogger), sandboxPipes)
    for (const [spawn, files] of [
      [pipeSpawn, childStdio],
      [asSandbox, sandboxPipes],
    ] as const) {
      const r = await startExec(
        { command: READ_BY_PATH, cwd: shared, env, timeoutMs: 10_000, stdin },
        spawn,
        systemClock,
        files,
      ).done
      expect([r.stdout.bytes().toString(), r.stderr.bytes().toString(), r.exitCode]).toEqual([
        'in\n3\nin\n',
        '',
        0,
      ])
    }
  })

  test('the sandbox user cannot write into it, and no name of it is left', async () => {
    const asSandbox = childStdioSpawn(sandboxSpawn(nodeSpawn, SANDBOX, [], silentLogger), sandboxPipes)
    const r = await startExec(
      {
        command: 'echo planted > /dev/stdin; cat; readlink /proc/self/fd/0',
        cwd: shared,
        env,
        timeoutMs: 10_000,
        stdin,
      },
      asSandbox,
      systemClock,
      sandboxPipes,
    ).done
    expect(r.stderr.bytes().toString()).toMatch(/Permission denied/)
    const [read, link] = r.stdout
      .bytes()
      .toString()
      .split(/\n(?=\/)/)
    expect(read).toBe('in')
    expect(link).toMatch(/conch-pipes-.*\(deleted\)\n$/)
  })

  test('where no file can be written, the bytes still arrive through a socket', async () => {
    const r = await startExec(
      { command: 'cat', cwd: shared, env, timeoutMs: 10_000, stdin },
      pipeSpawn,
      systemClock,
      { stdinFile: () => null },
    ).done
    expect(r.stdout.bytes().toString()).toBe('in\n')
  })
})

describe('output pipes: attacks from a shell running as the sandbox user', () => {
  test('cannot read its own or another session’s output pipe back through /proc', async ({ newSession }) => {
    const victim = await sandboxSession(newSession)
    const attacker = await sandboxSession(newSession)
    const victimPid = (await sh(victim, 'echo $$')).out.trim()
    const own = await sh(attacker, 'cat /dev/stdout </dev/null; cat /proc/self/fd/2')
    expect(own.exitCode).not.toBe(0)
    expect(own.err).toMatch(/Permission denied/)
    const steal = await sh(attacker, `timeout 2 cat /proc/${victimPid}/fd/1 /proc/${victimPid}/fd/62`)
    expect(steal.exitCode).not.toBe(0)
    expect(steal.err).toMatch(/Permission denied/)
    // The victim's output still arrives whole, to the victim.
    expect((await sh(victim, 'echo mine')).out).toBe('mine\n')
  })

  test('cannot reach the stock of pipes by name', async ({ newSession }) => {
    const s = await sandboxSession(newSession)
    const link = (await sh(s, 'readlink /proc/self/fd/1')).out.trim()
    expect(link).toMatch(/conch-pipes-.*\(deleted\)$/)
    const dir = link.slice(0, link.lastIndexOf('/'))
    const list = await sh(s, `ls ${dir}`)
    expect(list.exitCode).not.toBe(0)
    const open = await sh(
      s,
      `for i in $(seq 0 200); do : > ${dir}/p$i && echo opened; done 2>/dev/null; true`,
    )
    expect(open.out).toBe('')
  })

  test('holds no pipe of another child, and the agent holds no write end', async ({ newSession }) => {
    const a = await sandboxSession(newSession)
    const b = await sandboxSession(newSession)
    const pipesOf = async (s: BashSession) =>
      (await sh(s, "ls -l /proc/$$/fd | awk '/conch-pipes-/ { print $9, $11 }'")).out.trim().split('\n')
    const inA = await pipesOf(a)
    const inB = await pipesOf(b)
    // bash holds only its stdout, stderr and copies of them: the framing's 62 and 63, and the 255
    // an interactive bash keeps of the stderr it started with; each a pipe of its own shell.
    expect(inA.map((line) => line.split(' ')[0]).sort()).toEqual(['1', '2', '255', '62', '63'])
    const namesA = new Set(inA.map((line) => line.split(' ')[1]))
    for (const line of inB) expect(namesA.has(line.split(' ')[1]!)).toBe(false)
    // bash exits when its stdin closes; its pipes then end at once (no write end left elsewhere).
    await a.dispose()
    expect((await sh(b, 'echo still here')).out).toBe('still here\n')
  })
})

describe('output pipes: where none can be made', () => {
  test('the child gets a socket, no output is lost, and the agent says so once', async () => {
    const warnings: string[] = []
    const logger: Logger = {
      ...silentLogger,
      warn: (_fields: unknown, message: string) => warnings.push(message),
    }
    // Its directory goes away under it: no FIFO can be made or opened there again.
    const root = mkdtempSync(join(tmpdir(), 'conch-outpipes-gone-'))
    const broken = new ChildStdio(root, logger)
    rmSync(root, { recursive: true, force: true })
    const spawn = childStdioSpawn(nodeSpawn, broken)
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
    for (let i = 0; i < 3; i++) {
      const r = await startExec(
        { command: 'echo out; echo err >&2', cwd: shared, env, timeoutMs: 10_000 },
        spawn,
        systemClock,
      ).done
      expect([r.stdout.bytes().toString(), r.stderr.bytes().toString(), r.exitCode]).toEqual([
        'out\n',
        'err\n',
        0,
      ])
    }
    expect(warnings).toHaveLength(1)
    broken.dispose()
  })
})
