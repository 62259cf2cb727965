import { defineConfig } from 'vitest/config'

// One run covers every tier: unit tests next to the code, integration tests in each
// package's test/, the black-box e2e suite and the docs browser test. Each workspace
// package contributes its own project config. The VM tier (tests-vm) boots QEMU, so it joins
// the run under CI=true and when asked for (`pnpm test:vm` sets CONCH_VM_TESTS=1).
const vmTier = process.env.CI === 'true' || process.env.CONCH_VM_TESTS === '1'

export default defineConfig({
  test: {
    projects: ['packages/*', 'tests-e2e', 'apps/docs', ...(vmTier ? ['tests-vm'] : [])],
  },
})
