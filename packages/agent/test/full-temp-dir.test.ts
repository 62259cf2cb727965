// A session whose temporary directory is full (the sandbox's /dev/shm filled by its own code):
// a run whose command file cannot be written fails with a typed error that says what to do,
// the runs behind it run, and the shell works again once there is space. Before, the run stayed
// in the window with no line in bash, and nothing behind it ever ran. A real tmpfs of a few
// pages, mounted for the test (root).
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect } from 'vitest'
import { AgentError } from '../src/agent-error.ts'
import { sh, test } from './fixtures.ts'

const root = mkdtempSync(join(tmpdir(), 'conch-fulltmp-'))
afterAll(() => {
  spawnSync('umount', ['-l', root])
  rmSync(root, { recursive: true, force: true })
})

/** Mounts a 256 KiB tmpfs at `root` for the sessions' files. */
function mountSmallTmpfs(): void {
  if (process.getuid?.() !== 0) throw new Error('this test mounts a tmpfs: run it as root')
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0755', 'tmpfs', root], {
    encoding: 'utf8',
  })
  if (mounted.status !== 0) throw new Error(`mount tmpfs failed: ${mounted.stderr}`)
}

/** Fills the tmpfs to its last byte. */
function fill(): string {
  const path = join(root, 'filler')
  const chunk = Buffer.alloc(4096, 1)
  try {
    for (let i = 0; i < 1024; i++) writeFileSync(path, chunk, { flag: 'a' })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
  }
  return path
}

test('a run whose command file cannot be written fails typed; the runs behind it and later runs go on', async ({
  newSession,
}) => {
  mountSmallTmpfs()
  const s = await newSession({ tempRoot: root })
  expect((await sh(s, 'echo before')).out).toBe('before\n')
  const filler = fill()
  // Bigger than any page the slot's file has: its write needs space the tmpfs no longer has.
  const big = `echo ${'x'.repeat(64 * 1024)} > /dev/null; echo big`
  const failing = s.run({ runId: 'big', command: big })
  const behind = s.run({ runId: 'behind', command: 'echo behind' })
  const error = await failing.then(
    () => null,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(AgentError)
  expect((error as AgentError).code).toBe('INTERNAL')
  expect((error as AgentError).message).toMatch(/run "big" .* could not write its command file .*free space/)
  expect((await behind).stdout.toString()).toBe('behind\n')
  rmSync(filler)
  expect((await sh(s, big)).out).toBe('big\n')
  // The refused run's id is free again.
  expect((await s.run({ runId: 'big', command: 'echo again' })).stdout.toString()).toBe('again\n')
})
