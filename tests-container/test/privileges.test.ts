// The namespace driver's privileges in a container are the narrowest that work: the shared
// container has all of them and serves sandboxes (the other files show it); here each one is
// left out in turn and the runner in that container can no longer create a sandbox. AppArmor
// confines containers only where the host runs it, so that row is checked only there.
import { existsSync } from 'node:fs'
import { Sandbox } from '@conch/sdk'
import { describe, expect, test, vi } from 'vitest'
import { NAMESPACE_DRIVER_PRIVILEGES } from '../harness/container-privileges.ts'
import { startRunnerContainer } from '../harness/runner-container.ts'
import { docker, tier } from './tier-fixture.ts'

const appArmor = existsSync('/sys/module/apparmor/parameters/enabled')

/** What happens to a sandbox create in a container without `privilege`. */
async function createWithout(privilege: string): Promise<string> {
  await using box = await startRunnerContainer(docker(), {
    image: tier().image,
    name: 'conch-priv',
    without: privilege,
    waitHealthy: false,
  })
  // The runner either refuses to start (its driver check fails) or starts and then fails to
  // start an agent; both end in an answer, never in a hang.
  const state = await vi.waitFor(
    async () => {
      const now = (
        await docker().run(['inspect', '--format', '{{.State.Status}} {{.State.Health.Status}}', box.name])
      ).trim()
      if (now.startsWith('exited') || (now.endsWith('healthy') && !now.endsWith('unhealthy'))) return now
      throw new Error(`container without ${privilege} stayed ${now}`)
    },
    { timeout: 120_000, interval: 500 },
  )
  if (state.startsWith('exited')) return `runner exited: ${(await box.logs()).slice(-300)}`
  try {
    const sandbox = await Sandbox.create({ url: box.url, apiKey: box.apiKey })
    const r = await sandbox.exec('echo ran')
    return `created: ${r.stdout}`
  } catch (error) {
    return `refused: ${String(error)}`
  }
}

describe('namespace driver privileges in a container', () => {
  const needed = NAMESPACE_DRIVER_PRIVILEGES.filter((p) => p.name !== 'AppArmor unconfined' || appArmor)
  test.for(needed.map((p) => p.name))('cannot create a sandbox without %s', async (name) => {
    const outcome = await createWithout(name)
    expect(outcome).not.toMatch(/^created/)
  })
})
