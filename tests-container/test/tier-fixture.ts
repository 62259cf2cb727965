// The container tier's test API: the shared runner container from global-setup.ts, the docker
// CLI bound to the tier's daemon, and helpers that ask the runner through the SDK.
import { Sandbox } from '@conch/sdk'
import { inject, vi } from 'vitest'
import { type DockerCli, dockerCli } from '../harness/docker-cli.ts'
import type { ContainerTier } from '../harness/global-setup.ts'

/** The tier's daemon, image and shared container. */
export function tier(): ContainerTier {
  return inject('container')
}

/** The docker CLI bound to the tier's daemon. */
export function docker(): DockerCli {
  return dockerCli(tier().dockerHost)
}

/** Runs `command` as root in the container `name`; resolves with stdout. */
export function containerExec(name: string, command: string): Promise<string> {
  return docker().run(['exec', name, 'sh', '-c', command])
}

/** Creates a sandbox on the runner at `url`. */
export function createSandbox(runner: { url: string; apiKey: string }): Promise<Sandbox> {
  return Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
}

/** Waits until `url`/readyz answers 200: the runner serves and has reconnected its sandboxes. */
export async function waitReady(url: string, timeoutMs = 120_000): Promise<void> {
  await vi.waitFor(
    async () => {
      const ok = await fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      )
      if (!ok) throw new Error(`${url}/readyz did not answer 200 within ${timeoutMs} ms`)
    },
    { timeout: timeoutMs, interval: 250 },
  )
}
