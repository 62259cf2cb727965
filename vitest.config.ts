import { defineConfig } from 'vitest/config'

// One run covers every tier: unit tests next to the code, integration tests in each
// package's test/, the black-box e2e suite and the docs browser test. Each workspace
// package contributes its own project config.
export default defineConfig({
  test: {
    projects: ['packages/*', 'tests-e2e', 'apps/docs'],
  },
})
