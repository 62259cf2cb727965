// The e2e suite's runner handle, backed by the runner inside the tier's VM. The e2e files take
// their runner from tests-e2e/harness/runner-process.ts; the VM project resolves that module to
// this one, so `startRunner` returns the VM's runner (booted once by global-setup.ts) instead
// of spawning one on the host. Only what the shared e2e files use is real: the URL, the key and
// whether the runner runs. Disposing the handle leaves the VM to global-setup's teardown.
import { inject } from 'vitest'
import { GUEST_COMPILE_CACHE } from './vm.ts'

/**
 * Environment given to sandboxes: Node's compile cache that /init filled, so each agent starts
 * within the runner's hello deadline under TCG. No sweep marker: the VM is discarded whole.
 */
const SANDBOX_ENV: Record<string, string> = { NODE_COMPILE_CACHE: GUEST_COMPILE_CACHE }

/** The subset of the e2e runner handle that the shared e2e files use. */
export interface RunnerProcess extends AsyncDisposable {
  /** Base URL of the forwarded runner. */
  readonly url: string
  /** The runner's API key. */
  readonly apiKey: string
  /** Environment to give sandboxes. */
  readonly sandboxEnv: Record<string, string>
  /** True while the VM's runner serves; the VM outlives every test file. */
  isRunning(): boolean
}

/** Returns the VM's runner; the e2e fixture calls this once per file. */
export async function startRunner(_options: unknown = {}): Promise<RunnerProcess> {
  const vm = inject('vm')
  return {
    url: vm.url,
    apiKey: vm.apiKey,
    sandboxEnv: SANDBOX_ENV,
    isRunning: () => true,
    async [Symbol.asyncDispose]() {},
  }
}
