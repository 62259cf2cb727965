import { describe, expect } from 'vitest'
import { test } from './runner-fixture.ts'

describe('exec', () => {
  test('neither sees nor changes the state of a shell', async ({ sandbox }) => {
    const workspace = (await sandbox.exec('pwd')).stdout.trim()
    await using sh = await sandbox.shell()
    await sh.run('cd /usr && export E2E_SHELL_ONLY=1 && e2e_shell_fn() { :; }')

    const seen = await sandbox.exec('pwd; echo "[$E2E_SHELL_ONLY]"; type -t e2e_shell_fn || echo no-fn')
    expect(seen.stdout).toBe(`${workspace}\n[]\nno-fn\n`)

    await sandbox.exec('cd / && export E2E_EXEC_ONLY=1')
    const shell = await sh.run('pwd; echo "[$E2E_EXEC_ONLY]"; echo "[$E2E_SHELL_ONLY]"')
    expect(shell.stdout).toBe('/usr\n[]\n[1]\n')
  })

  test('runs each call in a fresh process', async ({ sandbox }) => {
    const first = await sandbox.exec('echo $$')
    const second = await sandbox.exec('echo $$')
    expect(first.stdout).not.toBe(second.stdout)
    await sandbox.exec('export E2E_EPHEMERAL=1')
    expect((await sandbox.exec('echo "[$E2E_EPHEMERAL]"')).stdout).toBe('[]\n')
  })

  test('passes cwd, env, stdin and the exit code', async ({ sandbox }) => {
    const result = await sandbox.exec('pwd; echo "$E2E_GIVEN"; cat; exit 4', {
      cwd: '/usr',
      env: { E2E_GIVEN: 'given' },
      stdin: 'from stdin\n',
    })
    expect(result).toMatchObject({ stdout: '/usr\ngiven\nfrom stdin\n', exitCode: 4, timedOut: false })
  })

  test('stops at its timeout with the partial output', async ({ sandbox }) => {
    const result = await sandbox.exec('echo begun; sleep 30', { timeoutMs: 1_000 })
    expect(result.timedOut).toBe(true)
    expect(result.stdout).toBe('begun\n')
  })
})
