// A state dir the runner cannot use stops `conch runner` with one line on stderr and exit code
// 2: never a stack trace, and never a loop (a recursive mkdir under /proc retries for ever).
import { type SpawnSyncReturns, spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url))
/** The sandbox uid the namespace driver uses; here an ordinary user that owns nothing. */
const UNPRIVILEGED = 1000

const scratch = mkdtempSync(join(tmpdir(), 'conch-state-dir-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

function cleanEnv(): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CONCH_') && v !== undefined) env[k] = v
  return { ...env, CONCH_API_KEY: 'conch_state_dir_test_key_0123456789' }
}

/** `command...` then `conch runner` on `stateDir`, to its exit (a runner that loops is killed and fails). */
function runner(
  stateDir: string,
  options: { uid?: number; prefix?: string[] } = {},
): SpawnSyncReturns<string> {
  const runnerArgs = ['--conditions=source', MAIN, 'runner', '--port', '0', '--state-dir', stateDir]
  const [command, ...args] = [...(options.prefix ?? []), process.execPath, ...runnerArgs]
  return spawnSync(command!, args, {
    encoding: 'utf8',
    env: cleanEnv(),
    timeout: 30_000,
    ...(options.uid === undefined ? {} : { uid: options.uid, gid: options.uid }),
  })
}

/** Asserts exit code 2 and one `conch:` line on stderr matching `pattern`, with no stack. */
function expectOneLine(result: SpawnSyncReturns<string>, pattern: RegExp): void {
  expect(result.error, 'the runner must exit on its own').toBeUndefined()
  expect(result.status, result.stderr).toBe(2)
  const lines = result.stderr.trimEnd().split('\n')
  expect(lines, result.stderr).toHaveLength(1)
  expect(lines[0]).toMatch(/^conch: /)
  expect(lines[0]).toMatch(pattern)
  expect(result.stderr).not.toMatch(/^\s+at /m)
  expect(result.stdout).not.toContain('listening')
}

describe('a state dir the runner cannot use', () => {
  it('is a file', () => {
    const file = join(scratch, 'a-file')
    writeFileSync(file, 'not a folder')
    expectOneLine(runner(file), /is a file, not a folder/)
  })

  it('is under a file', () => {
    const file = join(scratch, 'another-file')
    writeFileSync(file, 'not a folder')
    expectOneLine(runner(join(file, 'state')), /is under .*another-file, which is a file/)
  })

  it('is not writable by the runner user', () => {
    const locked = join(scratch, 'root-only')
    mkdirSync(locked, { mode: 0o755 })
    chmodSync(scratch, 0o755)
    expectOneLine(runner(join(locked, 'state'), { uid: UNPRIVILEGED }), /permission denied writing/)
    const existing = join(locked, 'existing')
    mkdirSync(existing, { mode: 0o755 })
    expectOneLine(
      runner(existing, { uid: UNPRIVILEGED }),
      /cannot write in the state dir .*permission denied/,
    )
  })

  it('is under /proc, and the runner exits instead of spinning', () => {
    expectOneLine(runner('/proc/x'), /\/proc\/x does not accept new files/)
    expectOneLine(runner('/proc/x/y/z'), /does not accept new files/)
  })

  it('is on a read-only file system, existing or not', () => {
    const mount = join(scratch, 'ro')
    mkdirSync(mount)
    // A private mount namespace: a tmpfs with a state dir in it, remounted read-only.
    const readOnly = (stateDir: string) =>
      runner(stateDir, {
        prefix: [
          'unshare',
          '--mount',
          '--',
          'sh',
          '-c',
          'mount -t tmpfs tmpfs "$1" && mkdir "$1/state" && mount -o remount,ro "$1" && shift && exec "$@"',
          'sh',
          mount,
        ],
      })
    expectOneLine(readOnly(join(mount, 'state')), /is on a read-only file system/)
    expectOneLine(readOnly(join(mount, 'new')), /cannot create the state dir .*read-only file system/)
  })
})
