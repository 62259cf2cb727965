import { defineProject } from 'vitest/config'

export default defineProject({
  resolve: { conditions: ['source'] },
  // Tests run in Vite's server-side environment, which resolves with its own conditions (the
  // SDK's `default` export is its build; `source` is its TypeScript).
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    name: 'runner',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // Integration tests drive real bash, sockets and runner processes on a 2-core machine that
    // runs every tier at once: a generous ceiling keeps a slow moment from failing a test.
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
})
