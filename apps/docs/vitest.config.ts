import { defineProject } from 'vitest/config'

// The docs tests: drift checks (errors page, CLI page), every code sample run against a real
// runner, and the browser test that builds the site and crawls it in Debian's chromium.
// `source` resolves @conch/sdk and @conch/protocol to their TypeScript sources, no build needed.
export default defineProject({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    name: 'docs',
    include: ['test/**/*.test.ts'],
    testTimeout: 240_000,
    hookTimeout: 240_000,
  },
})
