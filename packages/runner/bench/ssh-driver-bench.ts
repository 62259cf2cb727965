// The ssh driver against the namespace driver in one run, on one runner app (in process,
// through `inject`): sandbox create → first result of `true`, and the p50 of `true` run in a
// session of a warm sandbox. The SSH host is a real OpenSSH server on 127.0.0.1 started for
// the run (test/sshd-fixture.ts), so the figure is the cost of the SSH hop and the remote
// start, not of a network. Sandboxes alternate between the drivers so both see the same load;
// the ssh figures are also given as ratios to the namespace driver's. Needs root, bubblewrap
// and openssh-server. Part of `pnpm bench`.
//
//   pnpm exec node --conditions=source packages/runner/bench/ssh-driver-bench.ts
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../src/app.ts'
import { generateApiKey, hashSecret } from '../src/credentials.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import { SshDriver } from '../src/drivers/ssh-driver.ts'
import { StateStore } from '../src/state-store.ts'
import { startSshd } from '../test/sshd-fixture.ts'
import { p50, sampleDrivers } from './driver-sampling.ts'

const SANDBOXES = Number(process.env.BENCH_SANDBOXES ?? 3)
const RUNS = Number(process.env.BENCH_RUNS ?? 100)
const DRIVERS = ['namespace', 'ssh'] as const

await using sshd = await startSshd()
const stateDir = mkdtempSync(join(tmpdir(), 'conch-bench-ssh-'))
const apiKey = generateApiKey()
const store = StateStore.open(stateDir)
const ssh = new SshDriver({ hosts: new Map([['bench', sshd.host({ nodePath: process.execPath })]]) })
const app = buildApp({
  store,
  apiKeyHashes: [hashSecret(apiKey)],
  drivers: [new NamespaceDriver({ stateDir }), ssh],
})
await app.ready()
const headers = { authorization: `Bearer ${apiKey}` }

const ids: string[] = []
try {
  const { start, runs } = await sampleDrivers({
    app,
    headers,
    drivers: DRIVERS,
    sandboxes: SANDBOXES,
    runs: RUNS,
    ids,
  })
  const result = Object.fromEntries(
    DRIVERS.map((d) => [d, { createToFirstResultMsP50: p50(start[d]!), runTrueMsP50: p50(runs[d]!) }]),
  )
  const ratio = {
    sshVsNamespace: {
      createToFirstResult: Math.round((p50(start.ssh!) / p50(start.namespace!)) * 10) / 10,
      runTrue: Math.round((p50(runs.ssh!) / p50(runs.namespace!)) * 100) / 100,
    },
  }
  process.stdout.write(
    `${JSON.stringify({ sandboxesPerDriver: SANDBOXES, runsPerSandbox: RUNS, result, ratio }, null, 2)}\n`,
  )
} finally {
  for (const id of ids) await app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers })
  await app.close()
  ssh.close()
  store.close()
  rmSync(stateDir, { recursive: true, force: true })
}
