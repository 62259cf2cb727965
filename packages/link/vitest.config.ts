import { defineProject } from 'vitest/config'

export default defineProject({
  resolve: { conditions: ['source'] },
  test: {
    name: 'link',
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
  },
})
