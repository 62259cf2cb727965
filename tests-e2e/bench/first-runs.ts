// The first runs of a new sandbox, through the SDK, the runner and the agent: how much slower
// than a warmed sandbox's its first commands are (a new agent is a new Node process, whose run
// path V8 compiles and tiers up on first use). For a sandbox taken from the warm pool and one
// created cold (with env, which the pool does not hold), `shell.run('true')` is timed for runs
// 1..`count` and then `warm` more (the same sandbox warmed); the agent's CPU (every thread's
// `schedstat`) is read after each run. Each bucket of runs is reported as its median latency over
// the bare two-hop's p50 (bare-two-hop.ts) measured in the same round, and over the same
// sandbox's warm runs; the agent's CPU per run likewise over its warm runs.
//
// `firstRuns` is the `first-runs` phase of `pnpm bench`. Run alone it compares runners, rounds
// interleaved: this checkout's built runner and, with FIRST_RUNS_BASE=<checkout>, that
// checkout's built runner:
//   pnpm --filter @conch/runner build
//   FIRST_RUNS_BASE=<checkout> node --conditions=source tests-e2e/bench/first-runs.ts
// FIRST_RUNS_COUNT (1000), FIRST_RUNS_WARM (300) and FIRST_RUNS_ROUNDS (3) size it;
// FIRST_RUNS_POOL_IDLE_MS (0) is how long a full pool waits before its sandbox is taken.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { type CreateSandboxOptions, Sandbox } from '@conch/sdk'
import { REPO_ROOT, type RunnerProcess, startRunner } from '../harness/runner-process.ts'
import { BareTwoHop } from './bare-two-hop.ts'
import { sandboxProcesses } from './proc-memory.ts'
import type { RecordFigure } from './soak.ts'
import { median } from './stats.ts'

/** Buckets of run numbers (1-based, inclusive); those past the count are left out. */
const BUCKETS: readonly [number, number][] = [
  [1, 1],
  [2, 10],
  [11, 50],
  [51, 200],
  [201, 500],
  [501, 1000],
  [1001, 2000],
]

/** How long a full pool waits before the pooled sandbox is taken (0: at once). */
const POOL_IDLE_MS = Number(process.env.FIRST_RUNS_POOL_IDLE_MS ?? 0)

/** CPU time of every thread of `pid` so far, in ns (0 once it is gone). */
function threadsCpuNs(pid: number): number {
  let total = 0
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[0])
      } catch {
        // A thread that ended between the listing and the read.
      }
    }
  } catch {
    return 0
  }
  return total
}

/** One sandbox's curve: per bucket, median ms and agent µs of CPU per run; then its warm runs. */
interface Curve {
  /** The agent's CPU time before the first run (its start, and a pooled one's warm-up), in ms. */
  beforeMs: number
  /** The agent's resident memory before the first run, in MB. */
  rssMb: number
  /** How long `shell()` took, in ms. */
  shellMs: number
  /** Run 1's time, in ms. */
  firstMs: number
  buckets: { ms: number; cpuUs: number }[]
  warm: { ms: number; cpuUs: number }
}

/** Times `count + warm` sequential runs of `true` on a new shell of `box`. */
async function curve(runner: RunnerProcess, box: Sandbox, count: number, warm: number): Promise<Curve> {
  const agent = sandboxProcesses(runner.sweepTarget, runner.pid, box.id).agent
  const rssMb =
    Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${agent}/status`, 'latin1'))?.[1]) / 1024
  const s0 = performance.now()
  const sh = await box.shell()
  const shellMs = performance.now() - s0
  const times: number[] = []
  const cpu: number[] = [threadsCpuNs(agent)]
  for (let i = 0; i < count + warm; i++) {
    const t = performance.now()
    const result = await sh.run('true')
    times.push(performance.now() - t)
    cpu.push(threadsCpuNs(agent))
    if (result.exitCode !== 0) throw new Error(`run ${i + 1} exited with ${result.exitCode}`)
  }
  sh.close()
  const span = (from: number, to: number) => ({
    ms: median(times.slice(from - 1, to)),
    cpuUs: (cpu[to]! - cpu[from - 1]!) / 1000 / (to - from + 1),
  })
  return {
    beforeMs: cpu[0]! / 1e6,
    firstMs: times[0]!,
    shellMs,
    rssMb,
    buckets: BUCKETS.filter(([, to]) => to <= count).map(([from, to]) => span(from, to)),
    warm: span(count + 1, count + warm),
  }
}

/** What the phase needs. */
export interface FirstRunsOptions {
  runner: RunnerProcess
  connection: CreateSandboxOptions
  /** Resolves once the runner's warm pool is full. */
  poolFull: () => Promise<void>
  bare: BareTwoHop
  count: number
  warm: number
  /** Prefix of every figure's name (which runner, in an A/B). */
  label?: string
  record: RecordFigure
}

/** The figures of one round: a pooled sandbox's curve and a cold one's, against the bare two-hop. */
export async function firstRuns(o: FirstRunsOptions): Promise<void> {
  const prefix = o.label === undefined ? '' : `${o.label}: `
  for (const kind of ['warm pool', 'cold'] as const) {
    await o.poolFull()
    // A pooled sandbox usually waits a while before it is taken (its agent gives back the memory
    // its start and warm-up grew once it has been quiet for a while): FIRST_RUNS_POOL_IDLE_MS.
    if (kind === 'warm pool') await new Promise((resolve) => setTimeout(resolve, POOL_IDLE_MS))
    // The pool holds sandboxes without env: the harness's sweep marker alone makes a create cold.
    const t0 = performance.now()
    const box = await Sandbox.create(
      kind === 'cold'
        ? { ...o.connection, env: { ...o.connection.env, CONCH_BENCH_COLD: '1' } }
        : { url: o.connection.url, apiKey: o.connection.apiKey },
    )
    const createMs = performance.now() - t0
    try {
      const c = await curve(o.runner, box, o.count, o.warm)
      // The create, shell() and run 1 back to back (the /proc reads between them left out).
      o.record(`${prefix}${kind}: create to first result`, 'ms', createMs + c.shellMs + c.firstMs)
      const bareTimes: number[] = []
      for (let i = 0; i < 300; i++) {
        const t = performance.now()
        await o.bare.run('true')
        bareTimes.push(performance.now() - t)
      }
      const bare = median(bareTimes)
      o.record('bare two-hop: run(true) p50 (first-runs phase)', 'ms', bare)
      BUCKETS.filter(([, to]) => to <= o.count).forEach(([from, to], i) => {
        const b = c.buckets[i]!
        const runs = from === to ? `run ${from}` : `runs ${from}-${to}`
        o.record(`${prefix}${kind}: ${runs} p50 over bare two-hop`, 'x', b.ms / bare)
        o.record(`${prefix}${kind}: ${runs} p50 over its warm runs`, 'x', b.ms / c.warm.ms)
        o.record(`${prefix}${kind}: ${runs} agent CPU over its warm runs`, 'x', b.cpuUs / c.warm.cpuUs)
      })
      o.record(`${prefix}${kind}: warm runs p50 over bare two-hop`, 'x', c.warm.ms / bare)
      o.record(`${prefix}${kind}: warm runs agent CPU per run`, 'us', c.warm.cpuUs)
      o.record(`${prefix}${kind}: agent CPU before its first run`, 'ms', c.beforeMs)
      o.record(`${prefix}${kind}: agent RSS before its first run`, 'MB', c.rssMb)
    } finally {
      await box.destroy()
    }
  }
  const status = readFileSync(`/proc/${o.runner.pid}/status`, 'latin1')
  o.record(
    `${prefix}runner RSS after the round`,
    'MB',
    Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]) / 1024,
  )
}

/** The built runner of `checkout`. */
function builtRunner(checkout: string): string {
  return join(checkout, 'packages/runner/dist/conch.js')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const count = Number(process.env.FIRST_RUNS_COUNT ?? 1000)
  const warm = Number(process.env.FIRST_RUNS_WARM ?? 300)
  const rounds = Number(process.env.FIRST_RUNS_ROUNDS ?? 3)
  const sides: [string, string][] = [['this', builtRunner(REPO_ROOT)]]
  if (process.env.FIRST_RUNS_BASE) sides.push(['base', builtRunner(process.env.FIRST_RUNS_BASE)])
  const values = new Map<string, number[]>()
  const record: RecordFigure = (name, unit, value) => {
    const key = `${name} (${unit})`
    values.set(key, [...(values.get(key) ?? []), value])
  }
  await using bare = await BareTwoHop.start()
  const runners = await Promise.all(
    sides.map(async ([label, entry]) => {
      const runner = await startRunner({ entry, args: ['--log-level', 'warn', '--warm-pool', '1'] })
      const connection = { url: runner.url, apiKey: runner.apiKey, env: { ...runner.sandboxEnv } }
      const poolFull = async () => {
        const until = Date.now() + 60_000
        for (;;) {
          const res = await fetch(`${runner.url}/metrics`, {
            headers: { authorization: `Bearer ${runner.apiKey}` },
          })
          const ready = (await res.text()).split('\n').find((l) => l.startsWith('conch_warm_pool_ready{'))
          if (ready !== undefined && Number(ready.split(' ').at(-1)) >= 1) return
          if (Date.now() > until) throw new Error(`${label}: the warm pool did not fill within 60 s`)
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
      }
      return { label, runner, connection, poolFull }
    }),
  )
  try {
    for (let round = 0; round < rounds; round++) {
      for (const side of round % 2 === 0 ? runners : [...runners].reverse()) {
        process.stderr.write(`[first-runs] round ${round + 1}: ${side.label}\n`)
        await firstRuns({ ...side, bare, count, warm, record })
      }
    }
  } finally {
    for (const { runner } of runners) await runner.kill('SIGTERM')
  }
  console.log(
    `first runs: medians of ${rounds} rounds, ${count} runs + ${warm} warm, sides ${sides.map(([l]) => l).join(' / ')}`,
  )
  for (const [name, list] of values)
    console.log(
      `${name.padEnd(80)} ${list.map((v) => v.toFixed(2)).join(' ')}  median ${median(list).toFixed(2)}`,
    )
}
