// Idle hibernation and wake timings on one runner app (in process, through `inject`), per
// driver, each as a ratio to a plain create measured in the same round on the same runner:
//   - plain create → first result: POST /sandboxes, then an exec of `true` (the reference);
//   - idle hibernation: the runner's clock moved past `hibernateAfterMs`, one idle sweep
//     (`lifetimes.sweep()`: the agent asked, the snapshot taken, the sandbox stopped);
//   - wake → first result: an exec on the hibernated sandbox (new agent, workspace and shells
//     restored) until its answer.
// The workspace holds BENCH_HIBERNATE_FILES files (BENCH_HIBERNATE_MB in all) and the default
// session a cwd and a variable; every figure is the median of BENCH_HIBERNATE_ROUNDS. Needs root
// for the namespace and gvisor drivers. Part of `pnpm bench`.
//
//   pnpm exec node --conditions=source packages/runner/bench/hibernation-bench.ts
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../src/app.ts'
import { generateApiKey, hashSecret } from '../src/credentials.ts'
import { GvisorDriver } from '../src/drivers/gvisor-driver.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import type { SandboxDriver } from '../src/drivers/sandbox-driver.ts'
import { SnapshotStore } from '../src/snapshots/snapshot-store.ts'
import { StateStore } from '../src/state-store.ts'

const FILES = Number(process.env.BENCH_HIBERNATE_FILES ?? 100)
const MB = Number(process.env.BENCH_HIBERNATE_MB ?? 10)
const ROUNDS = Number(process.env.BENCH_HIBERNATE_ROUNDS ?? 5)
const DRIVERS = (process.env.BENCH_HIBERNATE_DRIVERS ?? 'local,namespace,gvisor').split(',')
const HIBERNATE_AFTER_MS = 60_000

function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}
const round2 = (n: number): number => Math.round(n * 100) / 100

const stateDir = mkdtempSync(join(tmpdir(), 'conch-bench-hibernate-'))
const apiKey = generateApiKey()
const store = StateStore.open(stateDir)
const all: Record<string, () => SandboxDriver> = {
  local: () => new LocalDriver({ stateDir }),
  namespace: () => new NamespaceDriver({ stateDir }),
  gvisor: () => new GvisorDriver({ stateDir }),
}
const drivers = DRIVERS.map((d) => {
  const make = all[d]
  if (!make) throw new Error(`unknown driver ${d}`)
  return make()
})
// The runner's clock: moved by the bench so that one sweep finds the sandbox idle.
let clock = Date.now()
const app = buildApp({
  store,
  apiKeyHashes: [hashSecret(apiKey)],
  drivers,
  snapshotStore: new SnapshotStore(stateDir),
  now: () => clock,
})
await app.ready()
const headers = { authorization: `Bearer ${apiKey}` }

async function call<T>(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object): Promise<T> {
  const res = await app.inject({ method, url, headers, ...(payload ? { payload } : {}) })
  if (res.statusCode !== 200) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`)
  return res.json() as T
}

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now()
  const value = await work()
  return [value, performance.now() - t0]
}

const exec = (id: string, command: string) =>
  call<{ stdout: string }>('POST', `/v1/sandboxes/${id}/exec`, { command, sessionId: 'default' })

const made: string[] = []
const report: Record<string, Record<string, number>> = {}
try {
  for (const driver of drivers) {
    const f: Record<string, number[]> = { createMs: [], hibernateMs: [], wakeMs: [] }
    for (let round = 0; round < ROUNDS; round++) {
      // Reference: a plain create to its first result, on the same runner in the same round.
      const [plain, createMs] = await timed(async () => {
        const info = await call<{ id: string }>('POST', '/v1/sandboxes', {
          driver: driver.name,
          hibernateAfterMs: null,
        })
        await exec(info.id, 'true')
        return info.id
      })
      made.push(plain)
      f.createMs!.push(createMs)
      await call('DELETE', `/v1/sandboxes/${plain}`)
      made.splice(made.indexOf(plain), 1)

      const { id } = await call<{ id: string }>('POST', '/v1/sandboxes', {
        driver: driver.name,
        hibernateAfterMs: HIBERNATE_AFTER_MS,
        idleTimeoutMs: 100 * HIBERNATE_AFTER_MS,
      })
      made.push(id)
      const bytes = Math.floor((MB * 1024 * 1024) / FILES)
      const seed = randomBytes(16).toString('hex')
      await exec(
        id,
        `mkdir -p data && cd data && for i in $(seq ${FILES}); do head -c ${bytes} /dev/urandom > f$i; done; export SEED=${seed}`,
      )
      clock += HIBERNATE_AFTER_MS
      const [, hibernateMs] = await timed(() => app.conch.manager.lifetimes.sweep())
      const status = app.conch.manager.list().find((s) => s.id === id)?.record.status
      if (status !== 'hibernated') throw new Error(`sandbox ${id} did not hibernate: ${status}`)
      f.hibernateMs!.push(hibernateMs)
      const [woke, wakeMs] = await timed(() => exec(id, 'echo "$SEED"; basename "$PWD"'))
      if (woke.stdout !== `${seed}\ndata\n`) throw new Error(`woke with other state: ${woke.stdout}`)
      f.wakeMs!.push(wakeMs)
      await call('DELETE', `/v1/sandboxes/${id}`)
      made.splice(made.indexOf(id), 1)
    }
    const m = (k: string): number => median(f[k]!)
    report[driver.name] = {
      createToFirstResultMs: round2(m('createMs')),
      idleHibernateMs: round2(m('hibernateMs')),
      idleHibernateVsCreate: round2(m('hibernateMs') / m('createMs')),
      wakeToFirstResultMs: round2(m('wakeMs')),
      wakeVsCreate: round2(m('wakeMs') / m('createMs')),
    }
  }
  process.stdout.write(
    `${JSON.stringify({ files: FILES, megabytes: MB, rounds: ROUNDS, drivers: report }, null, 2)}\n`,
  )
} finally {
  for (const id of made) await app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers })
  await app.close()
  store.close()
  rmSync(stateDir, { recursive: true, force: true })
}
