// Attack: requests that used to be accepted and then failed somewhere deeper (a 409 from a
// sandbox that could not start, a 503 from bwrap's argument list, megabytes of stored metadata,
// stdin silently changed). Each is a 400 that names the field and what is accepted, nothing is
// created, and the runner keeps serving.
import { ErrorBody, RunResult, SANDBOX_BOUNDS, SandboxList } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { stdinToBase64 } from '../../src/run-input.ts'
import { RunnerError } from '../../src/runner-error.ts'
import { exec, nsRunner } from '../namespace-runner.ts'
import { createSandbox, startRunner, type TestRunner } from '../runner-fixture.ts'

const MiB = 1024 * 1024

async function post(runner: TestRunner, url: string, payload: unknown) {
  return runner.app.inject({ method: 'POST', url, headers: runner.auth, payload: payload as object })
}

/** Asserts a 400 BAD_REQUEST whose message matches every pattern. */
function expectBadRequest(res: { statusCode: number; json: () => unknown }, ...patterns: RegExp[]): void {
  expect(res.statusCode).toBe(400)
  const { error } = ErrorBody.parse(res.json())
  expect(error.code).toBe('BAD_REQUEST')
  for (const pattern of patterns) expect(error.message).toMatch(pattern)
}

async function sandboxCount(runner: TestRunner): Promise<number> {
  const res = await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: runner.auth })
  return SandboxList.parse(res.json()).sandboxes.length
}

describe('create requests outside the bounds are a 400 and create nothing', () => {
  const cases: [string, object, RegExp[]][] = [
    ['memoryBytes: 1', { limits: { memoryBytes: 1 } }, [/limits\.memoryBytes/, /at least 67108864/]],
    [
      'memoryBytes: 2 TiB',
      { limits: { memoryBytes: 2 * 1024 * 1024 * MiB } },
      [/limits\.memoryBytes/, /at most/],
    ],
    ['pids: 1', { limits: { pids: 1 } }, [/limits\.pids/, /at least 32/]],
    ['cpus: 0.01', { limits: { cpus: 0.01 } }, [/limits\.cpus/, /at least 0\.1 cores/]],
    ['cpus: 1000', { limits: { cpus: 1000 } }, [/limits\.cpus/, /at most 256/]],
    ['diskBytes: 1', { limits: { diskBytes: 1 } }, [/limits\.diskBytes/, /at least 67108864/]],
    [
      '100k env vars',
      { env: Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`V${i}`, 'x'])) },
      [/env/, /100000 variables; at most 1024/],
    ],
    ['a 300 KiB env value', { env: { BIG: 'x'.repeat(300 * 1024) } }, [/env/, /at most 262144/]],
    ['an env name with a dash', { env: { 'A-B': 'x' } }, [/env/, /\[A-Za-z_\]/]],
    [
      '5 MB of metadata',
      { metadata: Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, 'v'.repeat(1000)])) },
      [/metadata/, /5000 keys; at most 64/],
    ],
    ['a 2 KB metadata value', { metadata: { note: 'v'.repeat(2048) } }, [/metadata\.note/, /at most 1024/]],
    [
      '40 keys of 1000 characters',
      { metadata: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, 'v'.repeat(1000)])) },
      [/metadata/, /at most 16384/],
    ],
  ]
  it.each(cases)('refuses %s', async (_name, body, patterns) => {
    await using runner = await startRunner()
    expectBadRequest(await post(runner, '/v1/sandboxes', body), ...patterns)
    expect(await sandboxCount(runner)).toBe(0)
    // The runner is unharmed: a plain create still works.
    await createSandbox(runner)
    expect(await sandboxCount(runner)).toBe(1)
  })

  it('publishes the bounds it enforces', () => {
    expect(SANDBOX_BOUNDS).toMatchObject({ minMemoryBytes: 64 * MiB, minPids: 32, minCpus: 0.1 })
  })
})

describe('command environments are bounded like a sandbox', () => {
  it('refuses 100k variables on exec and on a background process, and the sandbox keeps running', async () => {
    await using runner = await startRunner()
    const id = await createSandbox(runner)
    const env = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`V${i}`, 'x']))
    expectBadRequest(
      await post(runner, `/v1/sandboxes/${id}/exec`, { command: 'true', env }),
      /env/,
      /at most 1024/,
    )
    expectBadRequest(
      await post(runner, `/v1/sandboxes/${id}/processes`, { command: 'true', env }),
      /env/,
      /at most 1024/,
    )
    expectBadRequest(
      await post(runner, `/v1/sandboxes/${id}/processes`, { command: 'true', env: { 'BAD NAME': 'x' } }),
      /env\.BAD NAME/,
    )
    const ok = await post(runner, `/v1/sandboxes/${id}/exec`, {
      command: 'echo $GIVEN',
      env: { GIVEN: 'yes' },
    })
    expect(RunResult.parse(ok.json())).toMatchObject({ stdout: 'yes\n', exitCode: 0 })
  })
})

describe('stdin that says base64 must be base64', () => {
  it('refuses bad base64 stdin on exec and on a session run, and the sandbox keeps running', async () => {
    await using runner = await startRunner()
    const id = await createSandbox(runner)
    for (const stdin of ['not base64!', 'aGk=aGk=', 'a', '***']) {
      expectBadRequest(
        await post(runner, `/v1/sandboxes/${id}/exec`, { command: 'cat', stdin, stdinEncoding: 'base64' }),
        /stdin/,
        /not valid base64/,
      )
      expectBadRequest(
        await post(runner, `/v1/sandboxes/${id}/sessions/default/run`, {
          command: 'cat',
          stdin,
          stdinEncoding: 'base64',
        }),
        /stdin/,
        /not valid base64/,
      )
    }
    const ok = await post(runner, `/v1/sandboxes/${id}/exec`, {
      command: 'cat',
      stdin: Buffer.from('bytes\n').toString('base64'),
      stdinEncoding: 'base64',
    })
    expect(RunResult.parse(ok.json())).toMatchObject({ stdout: 'bytes\n', exitCode: 0 })
  })

  it('refuses bad base64 from every caller of the run input (the shell socket included)', () => {
    expect(() => stdinToBase64('%%%', 'base64')).toThrow(RunnerError)
    expect(() => stdinToBase64('%%%', 'base64')).toThrow(/not valid base64/)
    expect(stdinToBase64('aGk', 'base64')).toBe('aGk=')
    expect(stdinToBase64('%%%', 'utf8')).toBe(Buffer.from('%%%').toString('base64'))
  })
})

describe('the minimums are enough to work in', () => {
  it('starts a namespace sandbox at every minimum and runs a pipeline and background jobs in a session', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner, {
      limits: {
        memoryBytes: SANDBOX_BOUNDS.minMemoryBytes,
        pids: SANDBOX_BOUNDS.minPids,
        cpus: SANDBOX_BOUNDS.minCpus,
        diskBytes: SANDBOX_BOUNDS.minDiskBytes,
      },
    })
    const result = await exec(
      runner,
      id,
      'seq 1 1000 | sort -rn | head -1; for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; wait; echo done',
      'default',
    )
    expect(result).toMatchObject({ stdout: '1000\ndone\n', exitCode: 0 })
  }, 60_000)
})
