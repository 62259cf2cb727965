import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))
const run = (...args: string[]) =>
  spawnSync(process.execPath, ['--conditions=source', MAIN, ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH },
  })

describe('conch router CLI', () => {
  it('prints its usage with every flag for --help', () => {
    const out = run('router', '--help')
    expect(out.status).toBe(0)
    for (const flag of [
      '--shards',
      '--shard-pattern',
      '--shard-count',
      '--poll-interval-ms',
      '--max-body-bytes',
      '--headers-timeout-ms',
    ]) {
      expect(out.stdout).toContain(flag)
    }
  })

  it('refuses to start without shards or with a bad one, with one line that says what to fix', () => {
    const none = run('router', '--port', '0')
    expect(none.status).toBe(2)
    expect(none.stderr).toMatch(/no shards: pass --shards/)
    const bad = run('router', '--shards', 'conch-0=http://x:1/path')
    expect(bad.status).toBe(2)
    expect(bad.stderr).toMatch(/bare origin/)
    expect(bad.stderr).not.toMatch(/\n\s+at /)
  })
})
