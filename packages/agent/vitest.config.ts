import { defineProject } from 'vitest/config'

export default defineProject({
  resolve: { conditions: ['source'] },
  test: {
    name: 'agent',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // Integration tests drive real bash, sockets and runner processes on a 2-core machine that
    // runs every tier at once: a generous ceiling keeps a slow moment from failing a test.
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
})
