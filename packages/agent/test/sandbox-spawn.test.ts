// The agent's spawn with work cgroups: the move into each cgroup.procs is written off the agent's
// thread, and the child runs its command only after every move succeeded. Real processes; the
// cgroup.procs files are plain files here (a real one needs root and cgroups; the namespace
// driver's tests check commands land in `work`), so what is tested is the gate around the writes.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it, vi } from 'vitest'
import type { Logger } from '../src/logger.ts'
import { nodeSpawn, sandboxSpawn } from '../src/spawner.ts'

const dir = mkdtempSync(join(tmpdir(), 'conch-spawn-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A logger that keeps its warnings. */
function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = []
  const ignore = (): void => {}
  return { warnings, debug: ignore, info: ignore, warn: (_f, msg) => warnings.push(msg), error: ignore }
}

function exitOf(child: ReturnType<typeof nodeSpawn>): Promise<number | null> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)))
}

describe('sandbox spawn with work cgroups', () => {
  it('writes the child pid into every cgroup.procs, then runs the command', async () => {
    const procs = [join(dir, 'a.procs'), join(dir, 'b.procs')]
    const spawn = sandboxSpawn(nodeSpawn, undefined, procs, recordingLogger())
    const marker = join(dir, 'ran-ok')
    const child = spawn('/bin/sh', ['-c', `touch ${marker}`], { stdio: 'ignore' })
    expect(await exitOf(child)).toBe(0)
    for (const file of procs) expect(readFileSync(file, 'utf8')).toBe(String(child.pid))
    expect(existsSync(marker)).toBe(true)
  })

  it('never runs the command of a child whose move fails, and says so', async () => {
    const logger = recordingLogger()
    // The second move fails: its folder does not exist.
    const procs = [join(dir, 'c.procs'), join(dir, 'missing', 'cgroup.procs')]
    const spawn = sandboxSpawn(nodeSpawn, undefined, procs, logger)
    const marker = join(dir, 'ran-after-failed-move')
    const child = spawn('/bin/sh', ['-c', `touch ${marker}`], { stdio: 'ignore' })
    expect(await exitOf(child)).toBe(1)
    expect(existsSync(marker)).toBe(false)
    expect(logger.warnings).toEqual(['could not move a child into the work cgroup; it will not run'])
  })

  it('returns the child before its moves are written, and the child waits for them', async () => {
    // A FIFO with no reader: the move's write cannot finish until the test opens it, so the
    // spawn returning at all shows the write is off the agent's thread.
    const procs = [join(dir, 'd.procs')]
    execFileSync('mkfifo', [procs[0]!])
    const spawn = sandboxSpawn(nodeSpawn, undefined, procs, recordingLogger())
    const marker = join(dir, 'ran-before-move')
    const child = spawn('/bin/sh', ['-c', `touch ${marker}; exit 7`], { stdio: 'ignore' })
    const exited = exitOf(child)
    // The child is gated on the move: it blocks reading its gate (a child that ran its command
    // early would have exited instead, and never be seen blocked there).
    await vi.waitFor(
      () => expect(readFileSync(`/proc/${child.pid}/wchan`, 'utf8')).toMatch(/pipe_read|unix_stream_read/),
      {
        timeout: 10_000,
        interval: 10,
      },
    )
    expect(existsSync(marker)).toBe(false)
    expect(await readFile(procs[0]!, 'utf8')).toBe(String(child.pid))
    expect(await exited).toBe(7)
    expect(existsSync(marker)).toBe(true)
  })
})
