// What the agent's form costs a sandbox: create → first result of `true`, and the agent's idle
// resident memory, for the local and namespace drivers, each as a ratio to a reference measured
// in the same run: a bare Node process (`node -e`) started until its first output byte, and its
// idle RSS. Rounds alternate reference and drivers so all see the same machine load. Needs root
// and bubblewrap for the namespace driver. Part of `pnpm bench`.
//
//   pnpm exec node --conditions=source packages/runner/bench/agent-start-bench.ts
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from '../src/app.ts'
import { generateApiKey, hashSecret } from '../src/credentials.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import { descendantsOf } from '../src/drivers/proc-stat.ts'
import { StateStore } from '../src/state-store.ts'

const ROUNDS = Number(process.env.BENCH_SANDBOXES ?? 6)
/** How long a process sits idle before its RSS is read. */
const SETTLE_MS = 1_000
const DRIVERS = ['local', 'namespace'] as const

function p50(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}

function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024
}

/** The Node process among `root` and its descendants (the agent, under bwrap for namespace). */
function nodeProcess(root: number): number {
  for (const pid of [root, ...descendantsOf(root)]) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      if (argv[0]?.endsWith('/node') && argv.includes('--listenFd')) return pid
    } catch {
      // gone
    }
  }
  throw new Error(`no agent process under pid ${root}`)
}

/** A bare Node: spawn → first stdout byte, then its RSS once idle. */
async function reference(): Promise<{ startMs: number; rss: number }> {
  const t0 = performance.now()
  const child = spawn(process.execPath, ['-e', 'process.stdout.write("r"); setInterval(() => {}, 1e6)'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  await new Promise((resolve) => child.stdout.once('data', resolve))
  const startMs = performance.now() - t0
  await sleep(SETTLE_MS)
  const rss = rssBytes(child.pid ?? 0)
  child.kill('SIGKILL')
  return { startMs, rss }
}

const stateDir = mkdtempSync(join(tmpdir(), 'conch-bench-agent-'))
const apiKey = generateApiKey()
const store = StateStore.open(stateDir)
const app = buildApp({
  store,
  apiKeyHashes: [hashSecret(apiKey)],
  drivers: [new LocalDriver({ stateDir }), new NamespaceDriver({ stateDir })],
})
await app.ready()
const headers = { authorization: `Bearer ${apiKey}` }

const start: Record<string, number[]> = { reference: [], local: [], namespace: [] }
const rss: Record<string, number[]> = { reference: [], local: [], namespace: [] }
const ids: string[] = []
try {
  // One warm-up sandbox per driver: the namespace driver builds its runtime image once.
  for (const driver of DRIVERS) {
    const res = await app.inject({ method: 'POST', url: '/v1/sandboxes', headers, payload: { driver } })
    if (res.statusCode !== 200) throw new Error(`create ${driver}: ${res.statusCode} ${res.body}`)
    ids.push((res.json() as { id: string }).id)
  }
  for (let i = 0; i < ROUNDS; i++) {
    const ref = await reference()
    start.reference!.push(ref.startMs)
    rss.reference!.push(ref.rss)
    for (const driver of DRIVERS) {
      const t0 = performance.now()
      const res = await app.inject({ method: 'POST', url: '/v1/sandboxes', headers, payload: { driver } })
      if (res.statusCode !== 200) throw new Error(`create ${driver}: ${res.statusCode} ${res.body}`)
      const id = (res.json() as { id: string }).id
      ids.push(id)
      const run = await app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/exec`,
        headers,
        payload: { command: 'true' },
      })
      if (run.statusCode !== 200) throw new Error(`exec: ${run.statusCode} ${run.body}`)
      start[driver]!.push(performance.now() - t0)
      await sleep(SETTLE_MS)
      const pid = Number(store.getSandbox(id)?.driverState.pid)
      rss[driver]!.push(rssBytes(nodeProcess(pid)))
    }
  }
  const ms = (n: number): number => Math.round(n * 10) / 10
  const mib = (n: number): number => Math.round((n / 2 ** 20) * 10) / 10
  const ratio = (a: number, b: number): number => Math.round((a / b) * 100) / 100
  const result = Object.fromEntries(
    DRIVERS.map((d) => [
      d,
      {
        createToFirstResultMsP50: ms(p50(start[d]!)),
        createToFirstResultVsReference: ratio(p50(start[d]!), p50(start.reference!)),
        agentIdleRssMiB: mib(p50(rss[d]!)),
        agentIdleRssVsReference: ratio(p50(rss[d]!), p50(rss.reference!)),
      },
    ]),
  )
  const refFigures = { startMsP50: ms(p50(start.reference!)), idleRssMiB: mib(p50(rss.reference!)) }
  process.stdout.write(
    `${JSON.stringify({ rounds: ROUNDS, node: process.version, reference: refFigures, result }, null, 2)}\n`,
  )
} finally {
  for (const id of ids) await app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers })
  await app.close()
  store.close()
  rmSync(stateDir, { recursive: true, force: true })
}
