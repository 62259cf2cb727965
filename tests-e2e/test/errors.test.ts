import {
  AuthError,
  ConchError,
  Sandbox,
  SandboxNotFoundError,
  SessionNotFoundError,
  ShellClosedError,
} from '@conch/sdk'
import { describe, expect } from 'vitest'
import { connectionOf, test } from './runner-fixture.ts'

// Errors as a user meets them: thrown by the runner or the agent, carried over REST or the
// shell socket, and rebuilt by the SDK. Each arrives with its code, its details typed by that
// code, and exactly one suggestion at the end of the message.

/** The rejection of `promise`, which must reject with a ConchError. */
async function rejection(promise: Promise<unknown>): Promise<ConchError> {
  const err = await promise.then(
    () => {
      throw new Error('expected a rejection')
    },
    (e: unknown) => e,
  )
  if (!(err instanceof ConchError)) throw err
  return err
}

/** The message ends with the code's suggestion, which appears in it once. */
function expectOneSuggestion(err: ConchError): void {
  expect(err.suggestion.length).toBeGreaterThan(0)
  expect(err.message.endsWith(`; ${err.suggestion}`), err.message).toBe(true)
  expect(err.message.split(err.suggestion)).toHaveLength(2)
}

describe('errors reach the SDK with their code, typed details and one suggestion', () => {
  test('from the agent over REST: files', async ({ sandbox }) => {
    const missing = await rejection(sandbox.files.read('/workspace/none.txt'))
    expect(missing).toMatchObject({ code: 'FILE_NOT_FOUND', details: { path: '/workspace/none.txt' } })
    expectOneSuggestion(missing)

    const outside = await rejection(sandbox.files.read('/etc/passwd'))
    expect(outside).toMatchObject({ code: 'PATH_OUTSIDE_SANDBOX', details: { path: '/etc/passwd' } })
    expectOneSuggestion(outside)

    await sandbox.files.write('/workspace/d/f.txt', 'x')
    const full = await rejection(sandbox.files.remove('/workspace/d'))
    expect(full.code).toBe('DIRECTORY_NOT_EMPTY')
    expect(full.details).toEqual({ path: '/workspace/d' })
    expectOneSuggestion(full)
  })

  test('from the agent over REST: sessions', async ({ sandbox }) => {
    await sandbox.createSession({ id: 'dup' })
    const exists = await rejection(sandbox.createSession({ id: 'dup' }))
    expect(exists).toMatchObject({ code: 'SESSION_EXISTS', details: { sessionId: 'dup' } })
    expectOneSuggestion(exists)

    const gone = await rejection(sandbox.getSession('nope'))
    expect(gone).toBeInstanceOf(SessionNotFoundError)
    expect(gone.details).toEqual({ sessionId: 'nope' })
    expectOneSuggestion(gone)
  })

  test('from the runner over REST: auth and unknown sandboxes', async ({ runner }) => {
    const auth = await rejection(Sandbox.list({ url: runner.url, apiKey: 'conch_wrong' }))
    expect(auth).toBeInstanceOf(AuthError)
    expectOneSuggestion(auth)

    const none = await rejection(Sandbox.connect('sb_doesnotexist0000', connectionOf(runner)))
    expect(none).toBeInstanceOf(SandboxNotFoundError)
    expectOneSuggestion(none)
  })

  test('over the shell socket: a command over the limit, and a closed shell', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const large = await rejection(sh.run(`: ${'x'.repeat(1024 * 1024)}`))
    expect(large.code).toBe('COMMAND_TOO_LARGE')
    expect(large.details).toEqual({ limit: 1024 * 1024, value: 1024 * 1024 + 2 })
    expectOneSuggestion(large)

    const closed = await rejection(sh.run('exit 3'))
    expect(closed).toBeInstanceOf(ShellClosedError)
    expect(closed).toMatchObject({ exitCode: 3 })
    expectOneSuggestion(closed)
  })
})
