import { ShellClosedError } from '@conch/sdk'
import { describe, expect } from 'vitest'
import { RawShellSocket } from './raw-shell-socket.ts'
import { test } from './runner-fixture.ts'

describe('exit', () => {
  test('rejects the pending run with ShellClosedError carrying the exit code', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const error = await sh.run('exit 7').then(
      () => null,
      (err: unknown) => err,
    )
    expect(error).toBeInstanceOf(ShellClosedError)
    expect((error as ShellClosedError).exitCode).toBe(7)
    expect((error as ShellClosedError).code).toBe('SHELL_CLOSED')
  })

  test('rejects later runs at once', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    await expect(sh.run('exit 7')).rejects.toBeInstanceOf(ShellClosedError)
    await expect(sh.run('echo after')).rejects.toBeInstanceOf(ShellClosedError)
    await expect(sh.run('true')).rejects.toMatchObject({ exitCode: 7 })
  })

  test('sends shell_closed to a second attached client', async ({ runner, sandbox }) => {
    await using sh = await sandbox.shell()
    await sh.run('true')
    await using second = await RawShellSocket.connect({
      url: runner.url,
      sandboxId: sandbox.id,
      secret: runner.apiKey,
      sessionId: sh.sessionId,
    })
    await second.waitForType('scrollback_end')
    await expect(sh.run('exit 7')).rejects.toBeInstanceOf(ShellClosedError)
    const closed = await second.waitForType('shell_closed')
    expect(closed).toMatchObject({ type: 'shell_closed', code: 7, signal: null })
    expect(typeof closed.reason).toBe('string')
  })

  test('reports a killed bash as closed with its signal', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const error = await sh.run('kill -KILL $$').then(
      () => null,
      (err: unknown) => err,
    )
    expect(error).toBeInstanceOf(ShellClosedError)
    expect((error as ShellClosedError).signal).toBe('SIGKILL')
  })

  test('keeps the shell open after exit in a subshell and reports its code', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    await sh.run('export E2E_KEPT=1')
    const result = await sh.run('(exit 7)')
    expect(result.exitCode).toBe(7)
    const after = await sh.run('echo "still here $E2E_KEPT"')
    expect(after.stdout).toBe('still here 1\n')
    expect(after.exitCode).toBe(0)
  })
})
