import { defineProject } from 'vitest/config'

/** The e2e files that also run against the runner in the container, through the SDK only. */
const E2E_SUBSET = ['shell-state', 'exec', 'sessions', 'processes-files'].map(
  (name) => `../tests-e2e/test/${name}.test.ts`,
)

// One image and one shared runner container serve the tier: harness/global-setup.ts builds and
// starts them once and points the e2e fixture at the container (CONCH_E2E_URL and
// CONCH_E2E_API_KEY). Tests that restart or drop privileges start containers of their own.
// Files run one at a time: they share one container and a 2-core machine.
export default defineProject({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    name: 'container',
    include: ['test/**/*.test.ts', ...E2E_SUBSET],
    globalSetup: ['harness/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    fileParallelism: false,
  },
})
