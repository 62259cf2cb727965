// The agent's spare shell: started ahead of the first session with the default options, taken
// only by a create that would start the same shell, and never seen as a session until then.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { test as base, describe, expect } from 'vitest'
import type { BashSession } from '../src/bash-session.ts'
import { buildAgent } from '../src/build-agent.ts'
import { systemClock } from '../src/clock.ts'
import { isOutput } from '../src/log-records.ts'
import { silentLogger } from '../src/logger.ts'
import type { SessionManager } from '../src/session-manager.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'

const test = base.extend<{ sessions: SessionManager }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take a destructuring pattern
  sessions: async ({}, use) => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-spare-'))
    const root = join(dir, 'root')
    mkdirSync(root)
    const { server, sessions } = buildAgent({
      root,
      baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', BASE_ONLY: 'base' },
      spawn: nodeSpawn,
      clock: systemClock,
      logger: silentLogger,
      tempRoot: chooseTempRoot(),
      killGraceMs: 300,
      maxSessions: 2,
      linkSecret: mintLinkSecret(),
    })
    sessions.prepareSpare()
    await use(sessions)
    await server.close()
    await sessions.closeAll()
    rmSync(dir, { recursive: true, force: true })
  },
})

async function out(session: BashSession, command: string): Promise<string> {
  const r = await session.run({ runId: `r-${Math.random()}`, command })
  return r.stdout.toString()
}

describe('the spare shell', () => {
  test('is not a session: not listed and not counted against the session limit', async ({ sessions }) => {
    expect(sessions.sparePid).not.toBeNull()
    expect(sessions.all()).toEqual([])
    // The limit is 2: two sessions that cannot take the spare fit beside it.
    await sessions.create({ id: 'a', env: { X: '1' } })
    await sessions.create({ id: 'b', cleanEnv: true })
    expect(sessions.all().map((s) => s.id)).toEqual(['a', 'b'])
    await expect(sessions.create({})).rejects.toMatchObject({ code: 'TOO_MANY_SESSIONS' })
    expect(sessions.sparePid).not.toBeNull()
  })

  test('the first default create takes it, under the requested id, once', async ({ sessions }) => {
    const pid = sessions.sparePid
    const before = Date.now()
    const s = await sessions.create({ id: 'mine' })
    expect(s.pid).toBe(pid)
    expect(s.id).toBe('mine')
    expect(s.createdAt).toBeGreaterThanOrEqual(before)
    expect(sessions.sparePid).toBeNull()
    expect(await out(s, 'echo "$BASE_ONLY $PWD"; exit_code_probe=1; false')).toBe(`base ${s.cwd}\n`)
    expect(s.history().map((h) => h.command)).toEqual(['echo "$BASE_ONLY $PWD"; exit_code_probe=1; false'])
    const next = await sessions.create({})
    expect(next.pid).not.toBe(pid)
  })

  test('a create with other env, cwd, clean env or timeout starts its own shell and gets its options', async ({
    sessions,
  }) => {
    const pid = sessions.sparePid
    const withEnv = await sessions.create({ id: 'env', env: { ONLY_HERE: 'yes' } })
    expect(withEnv.pid).not.toBe(pid)
    expect(await out(withEnv, 'echo "$ONLY_HERE"')).toBe('yes\n')
    const withTimeout = await sessions.create({ id: 'slow', commandTimeoutMs: 1234 })
    expect(withTimeout.pid).not.toBe(pid)
    expect(withTimeout.commandTimeoutMs).toBe(1234)
    expect(sessions.sparePid).toBe(pid)
  })

  test('the default session takes it too', async ({ sessions }) => {
    const pid = sessions.sparePid
    const s = await sessions.get('default')
    expect(s.id).toBe('default')
    expect(s.pid).toBe(pid)
  })

  test('a spare killed by sandbox code is never handed out: the create starts a fresh shell', async ({
    sessions,
  }) => {
    const pid = sessions.sparePid!
    const other = await sessions.create({ id: 'attacker', env: { A: '1' } })
    await out(other, `kill -9 ${pid}`)
    await expect.poll(() => sessions.sparePid).toBeNull()
    const s = await sessions.create({ id: 'victim' })
    expect(s.pid).not.toBe(pid)
    expect(await out(s, 'echo ok')).toBe('ok\n')
  })

  test('state set in another session does not reach the shell the spare becomes', async ({ sessions }) => {
    const other = await sessions.create({ id: 'a', env: { A: '1' } })
    await out(other, 'export LEAK=1; alias ls=false; cd /')
    const s = await sessions.create({ id: 'b' })
    expect(await out(s, 'echo "${LEAK-unset}"; alias ls 2>/dev/null || echo noalias; pwd')).toBe(
      `unset\nnoalias\n${s.cwd}\n`,
    )
  })

  test('closeAll ends it', async ({ sessions }) => {
    const pid = sessions.sparePid!
    await sessions.closeAll()
    expect(sessions.sparePid).toBeNull()
    const gone = (): boolean => {
      try {
        process.kill(pid, 0)
        return false
      } catch {
        return true
      }
    }
    await expect.poll(gone).toBe(true)
  })
})

/** What a shell shows of itself, with the framing's random tag and per-process values masked. */
const SHOW_STATE = 'echo "rc=$?"; history; declare -p; declare -F; alias; trap -p; shopt; set -o'
/** Variables bash sets per process or per command, which differ between any two shells. */
const PER_PROCESS =
  /^declare -[-a-zA-Z]* (BASHPID|BASH_COMMAND|BASH_SOURCE|BASH_LINENO|EPOCHREALTIME|EPOCHSECONDS|LINENO|RANDOM|SRANDOM|SECONDS|_)=/

function masked(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => !PER_PROCESS.test(line))
    .map((line) =>
      line
        .replace(/(__conch_[a-z_]+?_)[0-9a-f]{8}\b/g, '$1TAG')
        .replace(/conch-[A-Za-z0-9]{6}/g, 'conch-DIR'),
    )
}

describe('the spare shell warm-up', () => {
  test('leaves nothing the user can see: no history, $? 0, no log bytes, the state of a shell without it', async ({
    sessions,
  }) => {
    // Taken at once, so the warm-up may still be queued: the first run waits behind it.
    const warm = await sessions.create({ id: 'warm' })
    const cold = await sessions.create({ id: 'cold' })
    expect(warm.pid).not.toBe(cold.pid)
    expect(warm.history()).toEqual([])
    expect(warm.lastExitCode).toBe(0)

    const [warmState, coldState] = [await out(warm, SHOW_STATE), await out(cold, SHOW_STATE)]
    // `history` lists nothing: neither the framing's lines nor a $HISTFILE bash read at start.
    expect(warmState.startsWith('rc=0\ndeclare ')).toBe(true)
    // The warm-up ran: it is an internal run, which leaves the framing's own flag behind.
    const flag = /^declare -[-a-zA-Z]* __conch_int_TAG=/
    expect(masked(warmState).filter((l) => flag.test(l))).toHaveLength(1)
    expect(masked(coldState).filter((l) => flag.test(l))).toHaveLength(0)
    expect(masked(warmState).filter((l) => !flag.test(l))).toEqual(masked(coldState))

    expect(warm.history().map((h) => h.command)).toEqual([SHOW_STATE])
    // The log holds the user's run and nothing else: its start, its output, its exit.
    const events = warm.log.readFrom(0)
    expect(events[0]).toMatchObject({ type: 'shell_start', offset: 0 })
    expect(events.at(-1)?.type).toBe('shell_exit')
    const runId = (events[0] as { id: string }).id
    expect(events.filter((e) => (e as { id: string | null }).id !== runId)).toEqual([])
    const logged = (s: BashSession) =>
      Buffer.concat(s.log.readFrom(0).flatMap((e) => (isOutput(e) ? [e.data] : []))).toString()
    expect(logged(warm)).toBe(warmState)
  })

  test('a second run after it sees the first run’s $?, not the warm-up’s', async ({ sessions }) => {
    const s = await sessions.create({ id: 'w' })
    await s.run({ runId: 'one', command: '(exit 7)' })
    expect(await out(s, 'echo $?')).toBe('7\n')
  })
})
