// The VM tier's test API: vitest's `test` with a fresh sandbox per test, created through
// `@conch/sdk` on the runner inside the tier's one VM (booted by harness/global-setup.ts).
import { Sandbox } from '@conch/sdk'
import { test as base, inject } from 'vitest'
import { GuestInspector } from '../harness/guest-inspector.ts'
import { GUEST_COMPILE_CACHE } from '../harness/vm.ts'

/** How tests reach the VM's runner through the SDK. */
export function vmConnection(): { url: string; apiKey: string } {
  const { url, apiKey } = inject('vm')
  return { url, apiKey }
}

/** Options of `Sandbox.create` for the VM's runner: its URL, key and the guest's compile cache. */
export function vmSandboxOptions(): { url: string; apiKey: string; env: Record<string, string> } {
  return { ...vmConnection(), env: { NODE_COMPILE_CACHE: GUEST_COMPILE_CACHE } }
}

/** The run's guest inspector: a root shell in the guest (see harness/guest-inspector.ts). */
export function guestInspector(): Promise<GuestInspector> {
  return GuestInspector.connect(inject('vm').inspectorId, vmConnection())
}

/** `test` with a sandbox on the VM's default driver, destroyed after the test. */
export const test = base.extend<{ sandbox: Sandbox }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads fixture dependencies from this pattern
  sandbox: async ({}, use) => {
    const sandbox = await Sandbox.create(vmSandboxOptions())
    await use(sandbox)
    await sandbox.destroy()
  },
})
