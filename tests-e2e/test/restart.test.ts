import { Sandbox } from '@conch/sdk'
import { describe, expect, test } from 'vitest'
import { startRunner } from '../harness/runner-process.ts'
import { E2E_RUNNER_ARGS } from './runner-fixture.ts'

describe('runner restart', () => {
  test('keeps the shell and its state when the runner is SIGKILLed and started again', async () => {
    await using first = await startRunner({ args: E2E_RUNNER_ARGS })
    const sandbox = await Sandbox.create({ url: first.url, apiKey: first.apiKey, env: first.sandboxEnv })
    const sh = await sandbox.shell()
    await sh.run('cd /usr && export E2E_SURVIVES=yes && e2e_fn() { echo "fn $1"; }')
    await sandbox.files.write('/workspace/e2e-restart.txt', 'on disk\n')
    const bashPid = (await sh.run('echo $$')).stdout.trim()

    const exit = await first.kill('SIGKILL')
    expect(exit.signal).toBe('SIGKILL')

    await using second = await startRunner({
      stateDir: first.stateDir,
      apiKey: first.apiKey,
      marker: first.marker,
      args: E2E_RUNNER_ARGS,
    })
    const again = await Sandbox.connect(sandbox.id, { url: second.url, apiKey: second.apiKey })
    await using shell = await again.reattachShell(sh.sessionId)
    const state = await shell.run('pwd; echo "$E2E_SURVIVES"; e2e_fn back; echo $$')
    expect(state.stdout).toBe(`/usr\nyes\nfn back\n${bashPid}\n`)
    expect(await again.files.read('/workspace/e2e-restart.txt')).toBe('on disk\n')
    expect((await again.exec('echo fresh')).stdout).toBe('fresh\n')
    await again.destroy()
  })
})
