// The harness's own promise: a runner disposed while its sandboxes live leaves nothing behind,
// not even the workspace disks that outlive a runner by design (a loop mount and device each).
import { existsSync } from 'node:fs'
import { Sandbox } from '@conch/sdk'
import { expect, test } from 'vitest'
import { startRunner } from '../harness/runner-process.ts'
import { mountsUnder } from '../harness/state-dir-mounts.ts'
import { E2E_RUNNER_ARGS } from './runner-fixture.ts'

test('disposing a runner with a live sandbox unmounts its disk and removes the state directory', async () => {
  const runner = await startRunner({ args: E2E_RUNNER_ARGS })
  const { stateDir } = runner
  try {
    const sandbox = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey, env: runner.sandboxEnv })
    expect((await sandbox.exec('echo alive')).stdout).toBe('alive\n')
    // The namespace and gVisor drivers mount a workspace disk; the local driver has none.
    if (sandbox.info.driver !== 'local') expect(mountsUnder(stateDir).length).toBeGreaterThan(0)
  } finally {
    await runner[Symbol.asyncDispose]()
  }
  expect(mountsUnder(stateDir)).toEqual([])
  expect(existsSync(stateDir)).toBe(false)
})
