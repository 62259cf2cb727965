// A live (gVisor) snapshot forked on another driver of the same runner, with the real runner,
// runsc, bubblewrap and agents: the checkpoint image cannot be restored there, so the fork is
// the shell-state restore (the manifest's `shells` and `workspace`), its shells new bash
// processes with their state put back and its background processes started again, and a
// client attaching sees `resumed` saying so. Fails (never skips) without runsc or bubblewrap.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ProcessList, SandboxInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import { GVISOR_LIVE_TIMEOUT_MS, gvisorRunner } from './gvisor-runner.ts'
import { exec } from './namespace-runner.ts'
import { createSandbox, shellUrl, type TestRunner } from './runner-fixture.ts'
import { ShellClient } from './shell-client.ts'

async function processes(runner: TestRunner, id: string): Promise<ProcessList['processes']> {
  const res = await runner.app.inject({
    method: 'GET',
    url: `/v1/sandboxes/${id}/processes`,
    headers: runner.auth,
  })
  expect(res.statusCode, res.body).toBe(200)
  return ProcessList.parse(res.json()).processes
}

describe('a live snapshot forked on another driver', () => {
  it(
    'falls back to the shell-state restore: state back, processes restarted, `resumed` says so',
    async () => {
      const stateDir = mkdtempSync(join(tmpdir(), 'conch-gv-ns-'))
      const namespace = new NamespaceDriver({ stateDir })
      const problem = namespace.problem({ limits: { memoryBytes: 1, cpus: 1 } })
      if (problem) throw new Error(`this host cannot run namespace sandboxes: ${problem}`)
      await using runner = await gvisorRunner({
        stateDir,
        removeStateDir: true,
        snapshots: true,
        listen: true,
        extraDrivers: [namespace],
      })
      const id = await createSandbox(runner)
      expect(runner.app.conch.manager.get(id).record.driver).toBe('gvisor')
      await exec(
        runner,
        id,
        'mkdir -p /workspace/sub && cd /workspace/sub && export KEPT=yes && greet() { echo "hi $1"; } && alias ll="ls -l" && echo data > /workspace/f',
        'default',
      )
      const started = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/processes`,
        headers: runner.auth,
        payload: { command: 'sleep 600' },
      })
      expect(started.statusCode, started.body).toBe(200)
      await exec(runner, id, 'sleep 500 & true', 'default')
      expect((await exec(runner, id, 'jobs -r', 'default')).stdout).toMatch(/sleep 500/)

      const snap = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/snapshots`,
        headers: runner.auth,
        payload: {},
      })
      expect(snap.statusCode, snap.body).toBe(200)
      const snapshotId = (snap.json() as { id: string }).id

      const res = await runner.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        headers: runner.auth,
        payload: { fromSnapshot: snapshotId, driver: 'namespace', restartProcesses: true },
      })
      expect(res.statusCode, res.body).toBe(200)
      const child = SandboxInfo.parse(res.json())
      expect(child.driver).toBe('namespace')
      expect(child.restoredFrom).toMatchObject({ snapshotId, processesRestarted: 1 })

      // A new shell (not the checkpointed process): its `&` job is gone, its state put back.
      expect((await exec(runner, child.id, 'jobs -r', 'default')).stdout).toBe('')
      const state = await exec(
        runner,
        child.id,
        'pwd; echo $KEPT; greet you; alias ll; cat /workspace/f',
        'default',
      )
      expect(state.stdout).toBe("/workspace/sub\nyes\nhi you\nalias ll='ls -l'\ndata\n")
      await vi.waitFor(
        async () =>
          expect(
            (await processes(runner, child.id)).some(
              (p) => p.command === 'sleep 600' && p.status === 'running',
            ),
          ).toBe(true),
        { timeout: 30_000, interval: 200 },
      )

      await using client = await ShellClient.open(
        shellUrl(runner, child.id, '?sessionId=default'),
        runner.apiKey,
      )
      const ready = await client.nextOf('shell_ready')
      expect(ready.resumed).toEqual({ snapshotId, processesRestarted: 1 })
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )
})
