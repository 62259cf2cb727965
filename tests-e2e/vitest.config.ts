import { defineProject } from 'vitest/config'

// Each test file boots its own runner process (and the agents it starts), so files are
// independent. Two workers fit the 2-core CI machine: most of the time is spent waiting on
// child processes, not in the test worker.
export default defineProject({
  resolve: { conditions: ['source'] },
  // Tests run in Vite's server-side environment, which resolves with its own conditions.
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    name: 'e2e',
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: true,
    maxWorkers: 2,
  },
})
