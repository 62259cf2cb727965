import { fileURLToPath } from 'node:url'
import { defineProject } from 'vitest/config'

/** The e2e files that also run against the runner in the VM: they need only its URL and key. */
const E2E_SUBSET = ['shell-state', 'exec', 'sessions'].map((name) => `../tests-e2e/test/${name}.test.ts`)

// One VM serves the whole tier: global-setup.ts boots it once and hands its URL and API key to
// every file through `inject('vm')`. The e2e files above reach their runner through one module,
// tests-e2e/harness/runner-process.ts; here that module resolves to harness/vm-runner.ts, so the
// same tests drive the runner inside the VM. Under TCG every process spawn in the guest is
// roughly 75 times slower than on the host, hence the long timeouts.
export default defineProject({
  resolve: {
    conditions: ['source'],
    alias: [
      {
        find: /^\.\.\/harness\/runner-process\.ts$/,
        replacement: fileURLToPath(new URL('./harness/vm-runner.ts', import.meta.url)),
      },
    ],
  },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    name: 'vm',
    include: ['test/**/*.test.ts', ...E2E_SUBSET],
    globalSetup: ['harness/global-setup.ts'],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // One file at a time: two agents starting at once in a 2-CPU TCG guest can miss the
    // runner's hello deadline.
    fileParallelism: false,
  },
})
