// The runner's node flags reach the process on every launch path: the bin (which the root
// `pnpm runner` script, the image's entrypoint and the systemd unit all run) starts Node again
// with RUNNER_NODE_FLAGS, in place, keeping its pid and every argument, and never overrides a
// flag the operator gave.
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import {
  missingRunnerNodeFlags,
  RUNNER_MALLOC_TUNABLES,
  RUNNER_NODE_FLAGS,
  runnerRelaunch,
} from '../src/runner-node-flags.ts'

const BIN = fileURLToPath(new URL('../src/bin.ts', import.meta.url))
const ROOT_MANIFEST = fileURLToPath(new URL('../../../package.json', import.meta.url))

const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup()
})

/**
 * The first `length` characters of `GLIBC_TUNABLES` in the environment of process `pid`. glibc
 * parses the variable in place and ends each setting it read with a NUL, so separators read
 * back as `:` here.
 */
function tunablesOf(pid: number, length: number): string {
  const environ = `\0${readFileSync(`/proc/${pid}/environ`, 'latin1')}`
  const at = environ.indexOf('\0GLIBC_TUNABLES=')
  if (at === -1) return ''
  const start = at + '\0GLIBC_TUNABLES='.length
  return environ.slice(start, start + length).replaceAll('\0', ':')
}

/** Starts `node [nodeArgs] bin.ts runner` until it listens; returns its pid's argv and its pid. */
async function startRunner(
  nodeArgs: string[],
  env: Record<string, string> = {},
): Promise<{ pid: number; argv: string[] }> {
  const stateDir = mkdtempSync(join(tmpdir(), 'conch-flags-'))
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('CONCH_') && k !== 'GLIBC_TUNABLES'),
  )
  const args = ['runner', '--port', '0', '--state-dir', stateDir, '--log-level', 'warn']
  const child = spawn(process.execPath, [...nodeArgs, '--conditions=source', BIN, ...args], {
    // The local driver and no warm pool: these tests read the runner's flags, and a pooled
    // namespace sandbox would leave mounts in the state dir when the runner is killed.
    env: {
      ...clean,
      CONCH_API_KEY: 'conch_test_key_0123456789abcdef',
      CONCH_DRIVER: 'local',
      CONCH_UNSAFE_LOCAL: '1',
      CONCH_WARM_POOL: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  cleanups.push(async () => {
    child.kill('SIGKILL')
    await exited
    rmSync(stateDir, { recursive: true, force: true })
  })
  let out = ''
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d
      if (out.includes('listening on')) resolve()
    })
    child.stderr.on('data', (d) => {
      out += d
    })
    void exited.then(() => reject(new Error(`the runner exited before listening:\n${out}`)))
  })
  const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').slice(0, -1)
  expect(argv.slice(-args.length)).toEqual(args)
  return { pid: child.pid!, argv }
}

describe('the runner node flags', () => {
  it('counts a flag as given by its name, on the command line or in NODE_OPTIONS', () => {
    expect(missingRunnerNodeFlags([])).toEqual(RUNNER_NODE_FLAGS)
    expect(missingRunnerNodeFlags(['--max_semi_space_size=16'], '--v8-pool-size=4')).toEqual([])
    expect(missingRunnerNodeFlags(['--conditions=source', '--max-semi-space-size', '8'])).toEqual([
      '--v8-pool-size=1',
    ])
  })

  it('are what `conch runner` runs with when started by the bin without them, in the same process', async () => {
    const { argv } = await startRunner([])
    expect(argv.slice(1, 1 + RUNNER_NODE_FLAGS.length)).toEqual(RUNNER_NODE_FLAGS)
    expect(argv).toContain('--conditions=source')
    expect(argv.filter((a) => a.startsWith('--max-semi-space-size'))).toHaveLength(1)
  })

  it('leave a flag the operator gave alone and add only the missing ones', async () => {
    const { argv } = await startRunner(['--max-semi-space-size=8'], { NODE_OPTIONS: '--v8-pool-size=2' })
    expect(argv.filter((a) => a.startsWith('--max-semi-space-size'))).toEqual(['--max-semi-space-size=8'])
    expect(argv.filter((a) => a.startsWith('--v8-pool-size'))).toEqual([])
  })

  it('come with the runner malloc settings unless the operator set GLIBC_TUNABLES', () => {
    const argv = ['/node', '/bin.js', 'runner']
    const flagged = [...RUNNER_NODE_FLAGS]
    expect(runnerRelaunch('/node', flagged, argv, { PATH: '/bin' })).toEqual({
      argv: ['/node', ...flagged, '/bin.js', 'runner'],
      env: { PATH: '/bin', GLIBC_TUNABLES: RUNNER_MALLOC_TUNABLES },
    })
    expect(runnerRelaunch('/node', flagged, argv, { GLIBC_TUNABLES: '' })).toBeNull()
    expect(runnerRelaunch('/node', [], argv, { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })).toEqual({
      argv: ['/node', ...RUNNER_NODE_FLAGS, '/bin.js', 'runner'],
      env: { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' },
    })
  })

  it("start the runner with the malloc settings in its environment, or the operator's own", async () => {
    const n = RUNNER_MALLOC_TUNABLES.length
    const started = await startRunner([])
    expect(tunablesOf(started.pid, n)).toBe(RUNNER_MALLOC_TUNABLES)
    const flagged = await startRunner([...RUNNER_NODE_FLAGS])
    expect(tunablesOf(flagged.pid, n)).toBe(RUNNER_MALLOC_TUNABLES)
    const own = await startRunner([], { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })
    expect(tunablesOf(own.pid, n).split(':')[0]).toBe('glibc.malloc.arena_max=2')
  })

  it('are spelt nowhere but in runner-node-flags.ts: `pnpm runner` goes through the bin', () => {
    const scripts = (JSON.parse(readFileSync(ROOT_MANIFEST, 'utf8')) as { scripts: Record<string, string> })
      .scripts
    expect(scripts.runner).toMatch(/^node --conditions=source packages\/runner\/src\/bin\.ts runner$/)
  })
})
