import { defineProject } from 'vitest/config'

export default defineProject({
  resolve: { conditions: ['source'] },
  // Tests run in Vite's server-side environment, which resolves with its own conditions.
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    name: 'mcp',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // The tests start a real runner process and drive MCP servers against it on a loaded 2-core
    // machine: a generous ceiling keeps a slow moment from failing a test.
    testTimeout: 60_000,
    hookTimeout: 90_000,
  },
})
