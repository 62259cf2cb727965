// A real runner and one sandbox on it for a test file: `useSandbox()` in the file's top scope
// starts them before its tests and removes them after.
import { Sandbox } from '@conch/sdk'
import { afterAll, beforeAll } from 'vitest'
import { type RunnerChild, startRunnerChild } from '../../sdk/test/runner-child.ts'

/** The runner and sandbox of the current test file, set once `beforeAll` ran. */
export interface SandboxFixture {
  runner: RunnerChild
  sb: Sandbox
}

/** Registers the hooks; read the fields inside tests. */
export function useSandbox(): SandboxFixture {
  const fixture = {} as SandboxFixture
  beforeAll(async () => {
    fixture.runner = await startRunnerChild()
    fixture.sb = await Sandbox.create({ url: fixture.runner.url, apiKey: fixture.runner.apiKey })
  }, 90_000)
  afterAll(async () => {
    await fixture.sb?.destroy()
    await fixture.runner?.[Symbol.asyncDispose]()
  })
  return fixture
}
