import { defineConfig } from 'vitest/config'

// One run covers every tier: unit tests next to the code, integration tests in each
// package's test/, the black-box e2e suite and the docs browser test. Each workspace
// package contributes its own project config. The VM tier (tests-vm) boots QEMU, so it joins
// only when asked for with CONCH_VM_TESTS=1: `pnpm test:vm`, and `npm test` under CI=true,
// which runs it after the other tiers. The container tier (tests-container) builds and runs the
// runner image under Docker, so it joins likewise only with CONCH_CONTAINER_TESTS=1:
// `pnpm test:container`, and `npm test` under CI=true, after the VM tier.
const vmTier = process.env.CONCH_VM_TESTS === '1'
const containerTier = process.env.CONCH_CONTAINER_TESTS === '1'

export default defineConfig({
  test: {
    projects: [
      'packages/*',
      'tests-e2e',
      'apps/docs',
      ...(vmTier ? ['tests-vm'] : []),
      ...(containerTier ? ['tests-container'] : []),
    ],
  },
})
