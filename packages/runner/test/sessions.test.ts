// Session routes with the real agent: state persists across runs, env/alias/history calls, limits.
import { ErrorBody, HistoryList, RunResult, SessionInfo, SessionList } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { createSandbox, startRunner, type TestRunner } from './runner-fixture.ts'

function api(runner: TestRunner, id: string) {
  return async (method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, payload?: unknown) => {
    const res = await runner.app.inject({
      method,
      url: `/v1/sandboxes/${id}${path}`,
      headers: runner.auth,
      ...(payload === undefined ? {} : { payload: payload as object }),
    })
    return { status: res.statusCode, body: res.json() as unknown }
  }
}

describe('sessions (real agent)', () => {
  it('creates a session with env and cwd, keeps shell state across runs, and deletes it', async () => {
    await using runner = await startRunner()
    const call = api(runner, await createSandbox(runner))
    await call('POST', '/files/mkdir', { path: 'sub' })
    const created = await call('POST', '/sessions', { id: 'build', env: { MODE: 'ci' }, cwd: 'sub' })
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    const info = SessionInfo.parse(created.body)
    expect(info).toMatchObject({ id: 'build', status: 'open' })
    expect(info.cwd).toMatch(/\/sub$/)
    await call('POST', '/sessions/build/run', { command: 'cd /tmp && export X=42 && f() { echo fn; }' })
    const run = await call('POST', '/sessions/build/run', { command: 'pwd; echo $X $MODE; f' })
    expect(RunResult.parse(run.body)).toMatchObject({
      stdout: '/tmp\n42 ci\nfn\n',
      exitCode: 0,
      encoding: 'utf8',
    })
    const list = SessionList.parse((await call('GET', '/sessions')).body)
    expect(list.sessions.map((s) => s.id)).toContain('build')
    expect(SessionInfo.parse((await call('GET', '/sessions/build')).body).id).toBe('build')
    expect((await call('DELETE', '/sessions/build')).body).toEqual({ ok: true })
    const missing = await call('GET', '/sessions/build')
    expect(ErrorBody.parse(missing.body).error.code).toBe('SESSION_NOT_FOUND')
  })

  it('reads, sets and unsets variables and aliases, and searches and replays history', async () => {
    await using runner = await startRunner()
    const call = api(runner, await createSandbox(runner))
    await call('POST', '/sessions', { id: 's1' })
    expect((await call('PUT', '/sessions/s1/env/GREETING', { value: 'hello world' })).body).toEqual({
      ok: true,
    })
    expect((await call('GET', '/sessions/s1/env/GREETING')).body).toEqual({
      name: 'GREETING',
      value: 'hello world',
    })
    const env = (await call('GET', '/sessions/s1/env')).body as { env: Record<string, string> }
    expect(env.env.GREETING).toBe('hello world')
    await call('DELETE', '/sessions/s1/env/GREETING')
    expect((await call('GET', '/sessions/s1/env/GREETING')).body).toEqual({ name: 'GREETING', value: null })

    expect((await call('PUT', '/sessions/s1/aliases/ll', { value: 'echo listed' })).body).toEqual({
      ok: true,
    })
    const aliases = (await call('GET', '/sessions/s1/aliases')).body as { aliases: Record<string, string> }
    expect(aliases.aliases.ll).toBe('echo listed')
    await call('DELETE', '/sessions/s1/aliases/ll')
    expect(
      ((await call('GET', '/sessions/s1/aliases')).body as { aliases: object }).aliases,
    ).not.toHaveProperty('ll')

    await call('POST', '/sessions/s1/run', { command: 'echo first' })
    await call('POST', '/sessions/s1/run', { command: 'echo second' })
    const history = HistoryList.parse((await call('GET', '/sessions/s1/history?contains=first')).body)
    expect(history.entries.map((e) => e.command)).toEqual(['echo first'])
    const replay = await call('POST', `/sessions/s1/history/${history.entries[0]!.index}/replay`)
    expect(RunResult.parse(replay.body).stdout).toBe('first\n')
  })

  it('refuses sessions beyond the limit and commands beyond the length limit', async () => {
    await using runner = await startRunner({ limits: { maxSessionsPerSandbox: 2, maxCommandBytes: 100 } })
    const call = api(runner, await createSandbox(runner))
    expect((await call('POST', '/sessions', {})).status).toBe(200)
    expect((await call('POST', '/sessions', {})).status).toBe(200)
    const third = await call('POST', '/sessions', {})
    expect(third.status).toBe(429)
    expect(ErrorBody.parse(third.body).error.code).toBe('TOO_MANY_SESSIONS')
    const long = await call('POST', '/exec', { command: `echo ${'x'.repeat(200)}` })
    expect(long.status).toBe(413)
    expect(ErrorBody.parse(long.body).error.code).toBe('COMMAND_TOO_LARGE')
  })
})
