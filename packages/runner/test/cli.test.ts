// The `conch runner` CLI as a real child process.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { cli } from './runner-process.ts'

describe('conch runner CLI', () => {
  it('generates an API key on first start, prints it once, stores only its hash, and stops on SIGTERM', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-cli-'))
    try {
      let key: string
      {
        await using first = cli(['runner', '--port', '0', '--state-dir', stateDir])
        const [line] = await first.waitFor(/conch runner listening on http:\/\/127\.0\.0\.1:(\d+)\n/)
        expect(first.out().startsWith(line)).toBe(true)
        key = (await first.waitFor(/conch_[\w-]{43}/))[0]
        // The line a second terminal pastes, right under the key's heading.
        expect(first.out()).toContain(`in a second terminal:\n\n    export CONCH_API_KEY=${key}\n`)
        const url = /http:\/\/[\d.:]+/.exec(line)![0]
        const res = await fetch(`${url}/v1/sandboxes`, { headers: { authorization: `Bearer ${key}` } })
        expect(res.status).toBe(200)
        expect(readFileSync(join(stateDir, 'runner.db')).includes(key)).toBe(false)
        expect(first.err()).not.toContain(key)
        first.child.kill('SIGTERM')
        expect(await first.exited).toBe(0)
      }
      await using second = cli(['runner', '--port', '0', '--state-dir', stateDir])
      const [line] = await second.waitFor(/listening on (http:\/\/[\d.:]+)/)
      expect(second.out()).not.toContain(key)
      const url = /http:\/\/[\d.:]+/.exec(line)![0]
      const res = await fetch(`${url}/v1/sandboxes`, { headers: { authorization: `Bearer ${key}` } })
      expect(res.status).toBe(200)
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })

  it('uses CONCH_API_KEY when set and never prints it', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-cli-'))
    try {
      const key = 'conch_test_key_0123456789abcdef'
      await using run = cli(['runner', '--port', '0', '--state-dir', stateDir], { CONCH_API_KEY: key })
      const [, url] = await run.waitFor(/listening on (http:\/\/[\d.:]+)/)
      const ok = await fetch(`${url}/v1/sandboxes`, { headers: { authorization: `Bearer ${key}` } })
      expect(ok.status).toBe(200)
      expect(run.out() + run.err()).not.toContain(key)
      expect(run.out()).not.toContain('export CONCH_API_KEY')
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })

  it('exits with a clear error for a bad flag value', async () => {
    await using run = cli(['runner', '--port', 'eighty'])
    expect(await run.exited).toBe(2)
    expect(run.err()).toMatch(
      /^conch: --port eighty is not valid: use an integer from 0 to 65535; run conch runner --help/,
    )
    expect(run.err().trimEnd().split('\n')).toHaveLength(1)
  })

  it('refuses to start a second runner on a state dir in use', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-cli-'))
    try {
      const key = 'conch_test_key_0123456789abcdef'
      await using first = cli(['runner', '--port', '0', '--state-dir', stateDir], { CONCH_API_KEY: key })
      await first.waitFor(/listening on/)
      await using second = cli(['runner', '--port', '0', '--state-dir', stateDir], { CONCH_API_KEY: key })
      expect(await second.exited).toBe(1)
      expect(second.err()).toContain(`another runner (pid ${first.child.pid})`)
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })
})
