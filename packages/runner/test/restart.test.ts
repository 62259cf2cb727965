// Restart survival: the runner process is SIGKILLed and started again on the same state dir.
// Agents are detached, so the shell keeps its cwd, env and functions; sandboxes whose agent
// died meanwhile are marked dead with the reason.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SandboxInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { generateApiKey } from '../src/credentials.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { StateStore } from '../src/state-store.ts'
import { destroyStateDir, runnerProcess } from './runner-process.ts'
import { ShellClient } from './shell-client.ts'

describe('restart', () => {
  it('reconnects to live agents after a SIGKILL; the shell keeps cwd, env and functions; dead agents are marked', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-restart-'))
    const apiKey = generateApiKey()
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
    const driver = new LocalDriver({ stateDir })
    try {
      let sessionId: string
      let liveId: string
      let doomedId: string
      {
        await using first = await runnerProcess(stateDir, apiKey)
        const make = async () =>
          (
            (await (
              await fetch(`${first.url}/v1/sandboxes`, { method: 'POST', headers, body: '{}' })
            ).json()) as { id: string }
          ).id
        liveId = await make()
        doomedId = await make()
        await using c = await ShellClient.open(
          `${first.url.replace('http', 'ws')}/v1/sandboxes/${liveId}/shell`,
          apiKey,
        )
        sessionId = String((await c.nextOf('shell_ready')).sessionId)
        expect(await c.run('s', 'cd /tmp && export KEPT=yes && greet() { echo "hi $1"; }')).toMatchObject({
          code: 0,
        })
        first.child.kill('SIGKILL')
        await first.exited
      }
      // Kill one agent while no runner is up.
      const store = StateStore.open(stateDir)
      const doomed = store.getSandbox(doomedId)!
      store.close()
      await driver.stop({ id: doomedId, workdir: doomed.workdir, state: doomed.driverState })

      await using second = await runnerProcess(stateDir, apiKey)
      const live = SandboxInfo.parse(
        await (await fetch(`${second.url}/v1/sandboxes/${liveId}`, { headers })).json(),
      )
      expect(live.status).toBe('running')
      // The restarted runner listens first and checks its agents in the background.
      await vi.waitFor(
        async () => {
          const dead = SandboxInfo.parse(
            await (await fetch(`${second.url}/v1/sandboxes/${doomedId}`, { headers })).json(),
          )
          expect(dead.status).toBe('dead')
          expect(dead.deadReason).toMatch(/no longer running|exited|killed/)
        },
        { timeout: 15_000, interval: 100 },
      )

      await using c = await ShellClient.open(
        `${second.url.replace('http', 'ws')}/v1/sandboxes/${liveId}/shell?sessionId=${sessionId}`,
        apiKey,
      )
      await c.nextOf('scrollback_end')
      expect(await c.run('after', 'pwd; echo $KEPT; greet you')).toMatchObject({
        stdout: '/tmp\nyes\nhi you\n',
        code: 0,
      })
      await fetch(`${second.url}/v1/sandboxes/${liveId}`, { method: 'DELETE', headers })
    } finally {
      await destroyStateDir(stateDir)
    }
  }, 60_000)
})
