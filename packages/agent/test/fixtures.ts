import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, test as base } from 'vitest'
import { BashSession, type BashSessionOptions } from '../src/bash-session.ts'
import { ChildStdio, childStdioSpawn } from '../src/child-stdio.ts'
import { systemClock } from '../src/clock.ts'
import type { LogEvent } from '../src/log-records.ts'
import { silentLogger } from '../src/logger.ts'
import { ProcessTable } from '../src/process-tree.ts'
import { buildSessionEnv } from '../src/session-env.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'

/** Builds sessions against real bash and disposes every one after the test. */
export type SessionFactory = (options?: Partial<BashSessionOptions>) => Promise<BashSession>

const processTable = new ProcessTable(systemClock)

/** Pipes for the children of this file's tests, as the agent gives its own (child-stdio.ts). */
export const childStdio = new ChildStdio(chooseTempRoot(), silentLogger)
afterAll(() => childStdio.dispose())

/** The spawn the agent uses, without a sandbox user: real pipes for stdout and stderr. */
export const pipeSpawn = childStdioSpawn(nodeSpawn, childStdio)

/** A session with test defaults: a clean env with PATH, a temp cwd, short grace periods. */
export const test = base.extend<{ workdir: string; newSession: SessionFactory }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take a destructuring pattern
  workdir: async ({}, use) => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-agent-test-'))
    await use(dir)
    rmSync(dir, { recursive: true, force: true })
  },
  newSession: async ({ workdir }, use) => {
    const sessions: BashSession[] = []
    await use(async (options = {}) => {
      const session = new BashSession({
        id: `t${sessions.length}`,
        env: buildSessionEnv(
          { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: workdir, LANG: 'C.UTF-8' },
          false,
        ),
        cwd: workdir,
        commandTimeoutMs: 10_000,
        spawn: pipeSpawn,
        clock: systemClock,
        logger: silentLogger,
        processTable,
        tempRoot: chooseTempRoot(),
        killGraceMs: 300,
        ...options,
      })
      sessions.push(session)
      await session.ready
      return session
    })
    await Promise.all(sessions.map((s) => s.dispose()))
  },
})

/** Runs a command and returns stdout and stderr as text with the exit code. */
export async function sh(
  session: BashSession,
  command: string,
  extra: { timeoutMs?: number; stdin?: Buffer } = {},
) {
  const out = await session.run({ runId: `r${Math.random().toString(36).slice(2)}`, command, ...extra })
  return { ...out, out: out.stdout.toString(), err: out.stderr.toString() }
}

/** Waits until the log records an event that matches. */
export function nextEvent(session: BashSession, match: (e: LogEvent) => boolean): Promise<LogEvent> {
  return new Promise((resolve) => {
    const { replay, subscription } = session.log.subscribe(session.log.endOffset, (e) => {
      if (match(e)) {
        subscription.close()
        resolve(e)
      }
      return true
    })
    const hit = replay.find(match)
    if (hit !== undefined) {
      subscription.close()
      resolve(hit)
    }
  })
}

/** Whether a pid is alive (and not a zombie). */
export function isAlive(pid: number): boolean {
  return processTable.read(pid)?.state !== undefined && processTable.read(pid)?.state !== 'Z'
}

/** Resolves once the /proc tick clock is two ticks past the start of `pid`. */
export async function untilTicksPassStartOf(pid: number): Promise<void> {
  const start = processTable.read(pid)?.startTicks ?? 0
  while (processTable.nowTicks() < start + 2) await new Promise((r) => setImmediate(r))
}
