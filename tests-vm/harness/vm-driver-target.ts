// The driver conformance suite's target for the runner inside the tier's VM: its default driver
// (the namespace driver, on the guest's cgroup v2) over the forwarded port, with the guest read
// through a GuestInspector. The VM has one runner, so every `start` hands out that runner; a
// handle destroys the sandboxes it created when disposed, and `restart` restarts the guest's
// runner on its state dir, as an operator would, keeping the sandboxes for the next handle.
import { SandboxInfo } from '@conch/protocol'
import type {
  ConformanceResponse,
  ConformanceRunner,
  ConformanceTarget,
  EnforcedLimit,
} from '../../packages/runner/test/driver-conformance.ts'
import type { GuestInspector } from './guest-inspector.ts'

/** How the target reaches the VM's runner. */
export interface VmTargetOptions {
  /** The runner's URL on the host. */
  url: string
  /** Its API key. */
  apiKey: string
  /** Environment given to every sandbox the cases create (the guest's compile cache). */
  env: Record<string, string>
  /** Reaches the run's guest inspector. */
  inspector: () => Promise<GuestInspector>
}

/** A target for the VM runner's default driver, which enforces `enforces`. */
export function vmDriverTarget(
  name: string,
  enforces: readonly EnforcedLimit[],
  options: VmTargetOptions,
): ConformanceTarget {
  return {
    name,
    enforces,
    start: async () => vmRunner(options, await options.inspector(), new Set()),
  }
}

/** A handle on the VM's runner; `created` holds the ids of sandboxes made through it and its successors. */
function vmRunner(
  options: VmTargetOptions,
  inspector: GuestInspector,
  created: Set<string>,
): ConformanceRunner {
  let handedOver = false
  const request = async (method: string, path: string, body?: unknown): Promise<ConformanceResponse> => {
    const res = await fetch(new URL(path, options.url), {
      method,
      headers: {
        authorization: `Bearer ${options.apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    return { status: res.status, body: text === '' ? null : JSON.parse(text) }
  }
  return {
    async request(method, path, body) {
      // Sandboxes get the guest's compile cache, so agents start within the hello deadline.
      const creating = method === 'POST' && path === '/v1/sandboxes'
      const fields = typeof body === 'object' && body !== null ? body : {}
      const res = await request(method, path, creating ? { ...fields, env: options.env } : body)
      const made = creating ? SandboxInfo.safeParse(res.body) : null
      if (made?.success) created.add(made.data.id)
      return res
    },
    async restart() {
      handedOver = true
      await inspector.restartRunner()
      return vmRunner(options, inspector, created)
    },
    footprint: (id) => inspector.footprint(id),
    leftovers: (footprint) => inspector.leftovers(footprint),
    async [Symbol.asyncDispose]() {
      if (handedOver) return
      for (const id of created) {
        const res = await request('DELETE', `/v1/sandboxes/${id}`)
        if (res.status !== 200 && res.status !== 404) {
          throw new Error(`destroying sandbox ${id}: ${res.status} ${JSON.stringify(res.body)}`)
        }
      }
    },
  }
}
