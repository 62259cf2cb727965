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

const SANDBOXES = Number(process.env.BENCH_SANDBOXES ?? 4)
const RUNS = Number(process.env.BENCH_RUNS ?? 100)
const DRIVERS = ['local', 'namespace', 'gvisor'] as const

function p50(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return Math.round(sorted[Math.floor((sorted.length - 1) / 2)]! * 100) / 100
}

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

async function run(id: string, sessionId?: string): Promise<void> {
  const res = await app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/exec`,
    headers,
    payload: { command: 'true', ...(sessionId ? { sessionId } : {}) },
  })
  if (res.statusCode !== 200) throw new Error(`exec: ${res.statusCode} ${res.body}`)
}

const start: Record<string, number[]> = { local: [], namespace: [], gvisor: [] }
const runs: Record<string, number[]> = { local: [], namespace: [], gvisor: [] }
const ids: string[] = []
try {
  for (let i = 0; i < SANDBOXES; i++) {
    for (const driver of DRIVERS) {
      const t0 = performance.now()
      const res = await app.inject({ method: 'POST', url: '/v1/sandboxes', headers, payload: { driver } })
      if (res.statusCode !== 200) throw new Error(`create ${driver}: ${res.statusCode} ${res.body}`)
      const id = (res.json() as { id: string }).id
      ids.push(id)
      await run(id)
      start[driver]!.push(performance.now() - t0)
      await run(id, 'default')
      for (let r = 0; r < RUNS; r++) {
        const t1 = performance.now()
        await run(id, 'default')
        runs[driver]!.push(performance.now() - t1)
      }
    }
  }
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
