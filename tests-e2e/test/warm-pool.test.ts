// The warm pool through the SDK against the real runner CLI: a create with default options is
// served from the pool (the runner's hit counter says so), its first run works, and a stopping
// runner destroys what is left in the pool. The runner's default driver is used, as users get it.
import { readFileSync } from 'node:fs'
import { Sandbox } from '@conch/sdk'
import { expect, it, vi } from 'vitest'
import { listTargetProcesses } from '../harness/process-sweep.ts'
import { startRunner } from '../harness/runner-process.ts'

async function metric(runner: { url: string; apiKey: string }, name: string): Promise<number> {
  const res = await fetch(`${runner.url}/metrics`, { headers: { authorization: `Bearer ${runner.apiKey}` } })
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name}{`))
  return line === undefined ? 0 : Number(line.split(' ').at(-1))
}

it('serves a default create from the warm pool and destroys the pool when the runner stops', async () => {
  await using runner = await startRunner({ args: ['--warm-pool', '1', '--log-level', 'warn'] })
  await vi.waitFor(async () => expect(await metric(runner, 'conch_warm_pool_ready')).toBe(1), {
    timeout: 60_000,
    interval: 100,
  })
  const sandbox = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
  expect(await metric(runner, 'conch_warm_pool_hits_total')).toBe(1)
  const shell = await sandbox.shell()
  expect(await shell.run('cd /tmp && echo "$PWD"')).toMatchObject({ stdout: '/tmp\n', exitCode: 0 })
  // The agent's spare shell, which the first session took, is never listed as a session of its own.
  expect((await sandbox.listSessions()).map((s) => s.id)).toEqual([shell.sessionId])
  // A second default session starts its own bash: the state of the first does not reach it.
  const second = await sandbox.shell()
  expect(await second.run('pwd; echo "${OLDPWD-none}"')).toMatchObject({ stdout: '/workspace\nnone\n' })
  second.close()
  expect(await shell.run('pwd')).toMatchObject({ stdout: '/tmp\n' })
  shell.close()
  await sandbox.destroy()
  // The pool refills; a graceful stop destroys that sandbox (a killed runner's next start would).
  await vi.waitFor(async () => expect(await metric(runner, 'conch_warm_pool_ready')).toBe(1), {
    timeout: 60_000,
    interval: 100,
  })
  expect(await runner.kill('SIGTERM')).toMatchObject({ code: 0 })
  // Nothing of the pooled sandbox is left: no process and no mount (a namespace disk) of it.
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
  expect(mounts).not.toContain(runner.stateDir)
  expect(listTargetProcesses(runner.sweepTarget).filter((p) => p.pid !== runner.pid)).toEqual([])
})
