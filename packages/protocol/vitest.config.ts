import { defineProject } from 'vitest/config'

export default defineProject({
  resolve: { conditions: ['source'] },
  test: { name: 'protocol', include: ['src/**/*.test.ts', 'test/**/*.test.ts'] },
})
