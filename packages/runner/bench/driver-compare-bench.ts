// Driver comparison in one run, on one runner app (in process, through `inject`): sandbox
// create → first result of `true`, and the p50 of `true` run in a session of a warm sandbox,
// for the local driver (no isolation: the reference), namespace and gVisor. Sandboxes alternate
// between drivers so all see the same machine load; each figure is also given as a ratio to the
// local driver's. Needs root, bubblewrap and runsc. Part of `pnpm bench`.
//
//   pnpm exec node --conditions=source packages/runner/bench/driver-compare-bench.ts
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../src/app.ts'
import { generateApiKey, hashSecret } from '../src/credentials.ts'
import { GvisorDriver } from '../src/drivers/gvisor-driver.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import { StateStore } from '../src/state-store.ts'
import { p50, sampleDrivers } from './driver-sampling.ts'

const SANDBOXES = Number(process.env.BENCH_SANDBOXES ?? 4)
const RUNS = Number(process.env.BENCH_RUNS ?? 100)
const DRIVERS = ['local', 'namespace', 'gvisor'] as const

const stateDir = mkdtempSync(join(tmpdir(), 'conch-bench-drivers-'))
const apiKey = generateApiKey()
const store = StateStore.open(stateDir)
const app = buildApp({
  store,
  apiKeyHashes: [hashSecret(apiKey)],
  drivers: [new LocalDriver({ stateDir }), new NamespaceDriver({ stateDir }), new GvisorDriver({ stateDir })],
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
  const vsLocal = (samples: Record<string, number[]>, d: string): number =>
    Math.round((p50(samples[d]!) / p50(samples.local!)) * 10) / 10
  const ratio = Object.fromEntries(
    DRIVERS.map((d) => [
      d,
      { createToFirstResultVsLocal: vsLocal(start, d), runTrueVsLocal: vsLocal(runs, d) },
    ]),
  )
  process.stdout.write(
    `${JSON.stringify({ sandboxesPerDriver: SANDBOXES, runsPerSandbox: RUNS, result, ratio }, null, 2)}\n`,
  )
} finally {
  for (const id of ids) await app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers })
  await app.close()
  store.close()
  rmSync(stateDir, { recursive: true, force: true })
}
