// The e2e test API: vitest's `test` with a real runner per test file and a fresh sandbox per
// test. The runner is the real CLI in a child process (harness/runner-process.ts); its
// teardown kills it and every process it or its agents left behind. With CONCH_E2E_URL and
// CONCH_E2E_API_KEY set, every file drives that runner instead (harness/external-runner.ts).

import { Sandbox } from '@conch/sdk'
import { test as base } from 'vitest'
import { type E2eRunner, externalRunner } from '../harness/external-runner.ts'
import { startRunner } from '../harness/runner-process.ts'

/** How a test reaches the runner through the SDK. */
export interface Connection {
  url: string
  apiKey: string
}

/** The SDK options for a runner. */
export function connectionOf(runner: E2eRunner): Connection {
  return { url: runner.url, apiKey: runner.apiKey }
}

/** Creates a sandbox whose processes the runner's teardown sweep can find. */
export function createSandbox(runner: E2eRunner): Promise<Sandbox> {
  return Sandbox.create({ ...connectionOf(runner), env: runner.sandboxEnv })
}

/** Runner flags of the e2e runs: a small scrollback, so evicting output is cheap. */
export const E2E_RUNNER_ARGS = ['--scrollback-bytes', '262144', '--log-level', 'warn'] as const

export const test = base.extend<{ $file: { runner: E2eRunner }; $test: { sandbox: Sandbox } }>({
  runner: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads fixture dependencies from this pattern
    async ({}, use) => {
      await using runner = externalRunner() ?? (await startRunner({ args: E2E_RUNNER_ARGS }))
      await use(runner)
    },
    { scope: 'file' },
  ],
  sandbox: async ({ runner }, use) => {
    const sandbox = await createSandbox(runner)
    await use(sandbox)
    if (!runner.isRunning()) return
    await sandbox.destroy()
  },
})
