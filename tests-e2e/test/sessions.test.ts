import { ConchError } from '@conch/sdk'
import { describe, expect } from 'vitest'
import { test } from './runner-fixture.ts'

describe('sessions', () => {
  test('keep their own env and cwd', async ({ sandbox }) => {
    const a = await sandbox.createSession({ id: 'e2e-a', env: { E2E_WHO: 'a' }, cwd: '/usr' })
    const b = await sandbox.createSession({ id: 'e2e-b', env: { E2E_WHO: 'b' }, cwd: '/' })
    expect((await a.exec('pwd; echo "$E2E_WHO"')).stdout).toBe('/usr\na\n')
    expect((await b.exec('pwd; echo "$E2E_WHO"')).stdout).toBe('/\nb\n')

    await a.exec('cd /usr/bin && export E2E_ONLY_A=1')
    expect((await a.exec('pwd; echo "[$E2E_ONLY_A]"')).stdout).toBe('/usr/bin\n[1]\n')
    expect((await b.exec('pwd; echo "[$E2E_ONLY_A]"')).stdout).toBe('/\n[]\n')
    expect((await sandbox.exec('pwd', { sessionId: 'e2e-a' })).stdout).toBe('/usr/bin\n')

    const ids = (await sandbox.listSessions()).map((s) => s.id)
    expect(ids).toEqual(expect.arrayContaining(['e2e-a', 'e2e-b']))
  })

  test('share files and processes', async ({ sandbox }) => {
    const workspace = (await sandbox.exec('pwd')).stdout.trim()
    const a = await sandbox.createSession({ id: 'e2e-writer' })
    const b = await sandbox.createSession({ id: 'e2e-reader', cwd: '/' })

    await a.exec('echo "written by a" > e2e-shared.txt')
    expect((await b.exec(`cat ${workspace}/e2e-shared.txt`)).stdout).toBe('written by a\n')

    const started = await a.exec('sleep 300 & echo $!')
    const pid = started.stdout.trim()
    expect(pid).toMatch(/^\d+$/)
    expect((await b.exec(`kill -0 ${pid} && echo visible`)).stdout).toBe('visible\n')
    expect((await b.exec(`kill ${pid}`)).exitCode).toBe(0)
  })

  test('gives a fresh session with the defaults for the id of a deleted one', async ({ sandbox }) => {
    const workspace = (await sandbox.exec('pwd')).stdout.trim()
    const temp = await sandbox.createSession({ id: 'e2e-temp' })
    await temp.exec('cd /usr && export E2E_GONE=1 && e2e_gone() { :; }')
    expect((await temp.exec('pwd')).stdout).toBe('/usr\n')

    await sandbox.deleteSession('e2e-temp')
    expect((await sandbox.listSessions()).map((s) => s.id)).not.toContain('e2e-temp')

    const fresh = await sandbox.exec('pwd; echo "[$E2E_GONE]"; type -t e2e_gone || echo no-fn', {
      sessionId: 'e2e-temp',
    })
    expect(fresh.stdout).toBe(`${workspace}\n[]\nno-fn\n`)
  })

  test('refuses to delete the default session', async ({ sandbox }) => {
    await sandbox.exec('export E2E_DEFAULT=1', { sessionId: 'default' })
    const error = await sandbox.deleteSession('default').then(
      () => null,
      (err: unknown) => err,
    )
    expect(error).toBeInstanceOf(ConchError)
    expect((error as ConchError).code).toBe('SESSION_PROTECTED')
    expect((await sandbox.exec('echo "$E2E_DEFAULT"', { sessionId: 'default' })).stdout).toBe('1\n')
  })
})
