// Attacks from inside a shell on its own command files (session-files.ts): a command removes
// its file, or puts a symlink or a file of its own in its place, so that the agent would
// write the next command through it or bash would source something else. Run as the agent's
// own user (a command can touch the files: each write checks the file) and as a sandbox user
// (the directory is closed to it: writes go unchecked, and holding drops the slot's file).
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect } from 'vitest'
import type { BashSession } from '../src/bash-session.ts'
import { silentLogger } from '../src/logger.ts'
import { nodeSpawn, sandboxSpawn } from '../src/spawner.ts'
import { nextEvent, sh, test } from './fixtures.ts'

/** `nobody`: a user other than the agent's, as drivers run shells. */
const SANDBOX = { uid: 65534, gid: 65534 }

/** A directory every user may write, for the files the sandbox user's commands leave. */
const shared = mkdtempSync(join(tmpdir(), 'conch-cmdfile-'))
chmodSync(shared, 0o777)
afterAll(() => rmSync(shared, { recursive: true, force: true }))

/** A session whose bash runs as the sandbox user, as a driver with a sandbox user starts it. */
function sandboxSession(newSession: (o: object) => Promise<BashSession>): Promise<BashSession> {
  if (process.getuid?.() !== 0) throw new Error('these tests start bash as another user: run them as root')
  return newSession({
    spawn: sandboxSpawn(nodeSpawn, SANDBOX, [], silentLogger),
    sandboxGid: SANDBOX.gid,
    cwd: shared,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: shared, LANG: 'C.UTF-8' },
  })
}

describe('command files: a shell running as the agent user', () => {
  test('a symlink put in place of the command file is never written through', async ({
    newSession,
    workdir,
  }) => {
    const s = await newSession()
    const target = join(workdir, 'target')
    writeFileSync(target, 'untouched\n')
    const r = await sh(s, `rm -f -- "$BASH_SOURCE"; ln -s ${target} "$BASH_SOURCE"; echo planted`)
    expect(r.out).toBe('planted\n')
    for (let i = 0; i < 5; i++) expect((await sh(s, `echo run ${i}`)).out).toBe(`run ${i}\n`)
    expect(readFileSync(target, 'utf8')).toBe('untouched\n')
  })

  test('a file of its own put in place of the command file is replaced before the next run', async ({
    newSession,
  }) => {
    const s = await newSession()
    const r = await sh(s, `rm -f -- "$BASH_SOURCE"; echo 'echo hijacked' > "$BASH_SOURCE"; echo planted`)
    expect(r.out).toBe('planted\n')
    expect((await sh(s, 'echo mine')).out).toBe('mine\n')
    expect((await sh(s, 'echo mine again')).out).toBe('mine again\n')
  })
})

describe('command files: a shell running as the sandbox user', () => {
  test('cannot remove, replace or write its command file, and every run sources its own command', async ({
    newSession,
  }) => {
    const s = await sandboxSession(newSession)
    expect((await sh(s, 'id -u')).out).toBe(`${SANDBOX.uid}\n`)
    const rm = await sh(s, 'rm -f -- "$BASH_SOURCE"')
    expect(rm.exitCode).not.toBe(0)
    const ln = await sh(s, `ln -sf /etc/passwd "$BASH_SOURCE"`)
    expect(ln.exitCode).not.toBe(0)
    const write = await sh(s, `echo 'echo hijacked' > "$BASH_SOURCE"`)
    expect(write.exitCode).not.toBe(0)
    // Longer and shorter commands in turn: each is written in place (no check) and read whole.
    for (let i = 0; i < 20; i++) {
      const text = i % 2 === 0 ? `long-${'x'.repeat(i * 10)}` : `s${i}`
      expect((await sh(s, `echo ${text}`)).out).toBe(`${text}\n`)
    }
  })

  test('an interrupt that holds written-ahead lines leaves every later run its own command', async ({
    newSession,
  }) => {
    const s = await sandboxSession(newSession)
    const count = join(shared, `count-${Math.random().toString(36).slice(2)}`)
    const started = nextEvent(s, (e) => 'data' in e && e.data.toString().includes('a-started'))
    const [a, b, c] = [
      'echo a-started; sleep 100; echo never',
      `echo "b saw $?"; echo b >> ${count}`,
      `echo c; echo c >> ${count}`,
    ].map((command, i) => s.run({ runId: `held${i}`, command }))
    await started
    expect(s.interrupt()).toBe(true)
    expect((await a!).exitCode).toBe(130)
    expect((await b!).stdout.toString()).toBe('b saw 130\n')
    expect((await c!).stdout.toString()).toBe('c\n')
    expect(readFileSync(count, 'utf8')).toBe('b\nc\n')
    for (let i = 0; i < 5; i++) expect((await sh(s, `echo after ${i}`)).out).toBe(`after ${i}\n`)
  })
})
