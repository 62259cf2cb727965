import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { systemClock } from '../src/clock.ts'
import { startExec } from '../src/one-shot-exec.ts'
import { pipeSpawn as spawn } from './fixtures.ts'

const cwd = mkdtempSync(join(tmpdir(), 'conch-exec-'))
afterAll(() => rmSync(cwd, { recursive: true, force: true }))
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
const exec = (command: string, extra: Partial<Parameters<typeof startExec>[0]> = {}) =>
  startExec({ command, cwd, env, timeoutMs: 10_000, ...extra }, spawn, systemClock).done

describe('one-shot exec', () => {
  it('returns exact stdout, stderr and exit code', async () => {
    const r = await exec('printf "a\\0b"; printf err >&2; exit 3')
    expect([...r.stdout.bytes()]).toEqual([97, 0, 98])
    expect(r.stderr.bytes().toString()).toBe('err')
    expect(r.exitCode).toBe(3)
    expect(r.timedOut).toBe(false)
  })

  it('runs in the given cwd with only the given env', async () => {
    const r = await exec('pwd; echo "${HOME-unset} $ONLY"', { env: { ...env, ONLY: 'me' } })
    expect(r.stdout.bytes().toString()).toBe(`${cwd}\nunset me\n`)
  })

  it('reads the given stdin, and /dev/null without it', async () => {
    expect((await exec('cat', { stdin: Buffer.from('in put') })).stdout.bytes().toString()).toBe('in put')
    expect((await exec('cat; echo done')).stdout.bytes().toString()).toBe('done\n')
  })

  it('stops the whole tree on timeout and reports timedOut', async () => {
    const r = await exec('echo started; (sleep 30; echo grandchild) & sleep 30', { timeoutMs: 300 })
    expect(r.timedOut).toBe(true)
    expect(r.stdout.bytes().toString()).toBe('started\n')
    expect(r.exitCode).toBe(143)
  })

  it('reports 128+n when a signal ends the command', async () => {
    expect((await exec('kill -9 $$')).exitCode).toBe(137)
  })

  it('caps the buffered output and counts every byte', async () => {
    const r = await exec('head -c 5000 /dev/zero', { outputCapBytes: 1000 })
    expect(r.stdout.bytes().length).toBe(1000)
    expect(r.stdout.totalBytes).toBe(5000)
    expect(r.stdout.truncated).toBe(true)
  })

  it('returns once bash exits even when a background child keeps the pipes open', async () => {
    const r = await exec('sleep 5 & echo quick')
    expect(r.stdout.bytes().toString()).toBe('quick\n')
    expect(r.exitCode).toBe(0)
  })
})
