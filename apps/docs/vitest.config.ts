import { defineProject } from 'vitest/config'

// The docs tests: the errors-page drift check, and the browser test that builds the site and
// crawls it in Debian's chromium.
export default defineProject({
  test: {
    name: 'docs',
    include: ['test/**/*.test.ts'],
    testTimeout: 150_000,
    hookTimeout: 150_000,
  },
})
