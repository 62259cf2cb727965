// A focused A/B of `shell.run('true')` latency: the runner and SDK of this checkout against those
// of another checkout (LATENCY_AB_BASE, the root of a checkout with its dependencies installed),
// both beside the bare two-hop reference, interleaved in one process so a noisy neighbour slows
// every side of a ratio. Each round runs BENCH_SEQUENTIAL_RUNS sequential runs on each side, in
// a rotating order; the figures are the median across rounds of each round's p50 and p90, each
// also as a ratio to the bare two-hop of the same round. Without LATENCY_AB_BASE only this
// checkout is measured. BENCH_CPU_PROFILE_DIR makes the runners write CPU profiles there.
//
//   LATENCY_AB_BASE=<checkout> pnpm --filter @conch/tests-e2e bench:latency-ab
//
// It also prints each process's CPU time, read and write syscalls and wake-ups per run (from
// /proc), the client, the runner, the agent and its bash beside the bare relay and holder:
// where a run spends its time, and how well each hop batches. LATENCY_AB_WS=1
// makes the SDK use the `ws` package; LATENCY_AB_NODE_ARGS adds node flags to the runners
// (`--perf-basic-prof` for perf). LATENCY_AB_PIPELINED=<n> measures bursts of n pipelined runs
// on one shell instead (each side's wall time per burst, and throughput as a ratio to the bare
// two-hop's burst of the same round). LATENCY_AB_PERF=<file> records this checkout's agent with
// `perf record -g` over the measured rounds (`perf report -i <file>`): the agent runs inside the
// sandbox, started by the driver with fixed flags, so it is profiled from outside, with nothing
// added to its launch that a sandbox could reach. Kernel and native frames are named; the
// agent's JIT code shows as one anonymous region. LATENCY_AB_PERF_STAT=1 prints `perf stat` of the
// same agent instead: CPU time, context switches, migrations and page faults, each per `pwrite64`
// (the agent writes each run's command into its command file with one). LATENCY_AB_GAP_MS=<ms>
// waits that long after each run, as a user's runs come (timers that fire between spaced runs
// then count in the CPU figures).

import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { startRunner } from '../harness/runner-process.ts'
import { BareTwoHop } from './bare-two-hop.ts'
import { cpuMs as procCpuMs } from './proc-cpu.ts'
import { sandboxProcesses } from './proc-memory.ts'
import { median, percentile } from './stats.ts'

const BASE = process.env.LATENCY_AB_BASE
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const RUNS = Number(process.env.BENCH_SEQUENTIAL_RUNS ?? 300)
const COMMAND = process.env.LATENCY_AB_COMMAND ?? 'true'
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE_DIR
const PIPELINED = Number(process.env.LATENCY_AB_PIPELINED ?? 0)
const PERF_FILE = process.env.LATENCY_AB_PERF
const PERF_STAT = process.env.LATENCY_AB_PERF_STAT === '1'
const GAP_MS = Number(process.env.LATENCY_AB_GAP_MS ?? 0)

interface Side {
  name: string
  /** The processes on this side's path besides this one, by role. */
  pids: Record<string, number>
  /** CPU ms per run of each role, summed over rounds. */
  cpu: Record<string, number>
  /** Reads, writes and wake-ups per run of each role, summed over rounds. */
  io: Record<string, number[]>
  run: () => Promise<unknown>
  rounds: { p50: number; p90: number; r50: number; r90: number }[]
  dispose: () => Promise<void>
}

async function sequential(runs: number, fn: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    await fn()
    samples.push(performance.now() - t0)
    if (GAP_MS > 0) await new Promise((resolve) => setTimeout(resolve, GAP_MS))
  }
  return samples
}

/** `runs` calls of `fn` one after another, or with LATENCY_AB_PIPELINED one burst: its wall ms. */
async function load(runs: number, fn: () => Promise<unknown>): Promise<number[]> {
  if (PIPELINED <= 0) return sequential(runs, fn)
  const t0 = performance.now()
  await Promise.all(Array.from({ length: PIPELINED }, fn))
  return [performance.now() - t0]
}
const RUNS_PER_LOAD = PIPELINED > 0 ? PIPELINED : RUNS
/** The bare side runs two loads per round: two bursts, or two halves of the sequential runs. */
const BARE_RUNS_PER_LOAD = PIPELINED > 0 ? PIPELINED * 2 : RUNS

async function productSide(name: string, root: string): Promise<Side> {
  const runner = await startRunner({
    entry: join(root, 'packages/runner/src/main.ts'),
    args: ['--log-level', 'warn', '--max-queued-runs-per-sandbox', String(Math.max(1024, PIPELINED * 2))],
    nodeArgs: [
      ...(PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-interval=100', `--cpu-prof-dir=${PROFILE_DIR}`] : []),
      ...(process.env.LATENCY_AB_NODE_ARGS ?? '').split(' ').filter((a) => a !== ''),
    ],
  })
  const sdk = (await import(
    pathToFileURL(join(root, 'packages/sdk/src/index.ts')).href
  )) as typeof import('@conch/sdk')
  const env: Record<string, string> = { ...runner.sandboxEnv }
  if (PROFILE_DIR) env.NODE_OPTIONS = `--cpu-prof --cpu-prof-dir=${PROFILE_DIR}`
  // LATENCY_AB_WS=1: the SDK talks through the `ws` package instead of Node's global WebSocket.
  const WebSocket = process.env.LATENCY_AB_WS === '1' ? (await import('ws')).WebSocket : undefined
  const sb = await sdk.Sandbox.create({
    url: runner.url,
    apiKey: runner.apiKey,
    env,
    ...(WebSocket ? { WebSocket: WebSocket as never } : {}),
  })
  const sh = await sb.shell()
  await sh.run('true')
  const procs = sandboxProcesses(runner.sweepTarget, runner.pid, sb.id)
  return {
    name,
    pids: { runner: runner.pid, agent: procs.agent, bash: procs.bashes[0] ?? -1 },
    cpu: {},
    io: {},
    run: async () => {
      const r = await sh.run(COMMAND)
      if (r.exitCode !== 0) throw new Error(`${name}: ${COMMAND} exited ${r.exitCode}`)
    },
    rounds: [],
    dispose: async () => {
      await sh.close()
      await sb.destroy()
      // A profile is written when node exits normally.
      await runner.kill('SIGTERM')
      await runner[Symbol.asyncDispose]()
    },
  }
}

/**
 * CPU time a process used so far, in ms: the scheduler's nanoseconds summed over its threads
 * (proc-cpu.ts); /proc's 10 ms ticks are too coarse for a few us per run.
 */
function cpuMs(pid: number): number {
  if (pid === process.pid) {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1000
  }
  if (!existsSync(`/proc/${pid}`)) return Number.NaN
  return procCpuMs(pid)
}

/**
 * Read and write syscalls (all threads) and voluntary context switches (wake-ups of the main
 * thread) a process made so far: how well it batches.
 */
function ioCounts(pid: number): number[] {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8')
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const field = (text: string, name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(text)?.[1])
    return [field(io, 'syscr'), field(io, 'syscw'), field(status, 'voluntary_ctxt_switches')]
  } catch {
    return [Number.NaN, Number.NaN, Number.NaN]
  }
}

/**
 * Runs `fn` and adds each process's CPU ms per run to `into` and its reads, writes and
 * wake-ups per run to `io`.
 */
async function measured(
  pids: Record<string, number>,
  into: Record<string, number>,
  io: Record<string, number[]>,
  runs: number,
  fn: () => Promise<number[]>,
): Promise<number[]> {
  const all = { client: process.pid, ...pids }
  const before = Object.fromEntries(Object.entries(all).map(([k, pid]) => [k, cpuMs(pid)]))
  const ioBefore = Object.fromEntries(Object.entries(all).map(([k, pid]) => [k, ioCounts(pid)]))
  const samples = await fn()
  for (const [k, pid] of Object.entries(all)) {
    into[k] = (into[k] ?? 0) + (cpuMs(pid) - before[k]!) / runs
    const now = ioCounts(pid)
    io[k] = now.map((n, i) => (io[k]?.[i] ?? 0) + (n - ioBefore[k]![i]!) / runs)
  }
  return samples
}

/** `perf stat`'s counts as figures per pwrite64 of the agent (one per run); perf's own text otherwise. */
function perStatReport(text: string): string {
  const counts = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,.]+)\s+(?:msec\s+)?(\S+)/.exec(line)
    if (m) counts.set(m[2]!, Number(m[1]!.replaceAll(',', '')))
  }
  const runs = counts.get('syscalls:sys_enter_pwrite64')
  if (!PERF_STAT || !runs) return text.trim()
  const per = (name: string, scale = 1): string =>
    (((counts.get(name) ?? Number.NaN) * scale) / runs).toFixed(2)
  return `agent per pwrite64 (${runs}): ${per('task-clock', 1000)} us CPU, ${per('context-switches')} context switches, ${per('cpu-migrations')} migrations, ${per('page-faults')} page faults`
}

const bare = await BareTwoHop.start()
/** The first child of `pid` (the bare holder's bash), or -1. */
function childOf(pid: number): number {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ')
    return children[0] ? Number(children[0]) : -1
  } catch {
    return -1
  }
}

const barePids = { relay: bare.relayPid, holder: bare.holderPid, bash: childOf(bare.holderPid) }
const bareCpu: Record<string, number> = {}
const bareIo: Record<string, number[]> = {}
const sides: Side[] = []
if (BASE) sides.push(await productSide('base', BASE))
sides.push(await productSide('this', join(import.meta.dirname, '../..')))
const bareRounds: number[][] = []
const thisAgent = sides.at(-1)!.pids.agent!
let perf: ChildProcess | undefined
const STAT_EVENTS = 'task-clock,context-switches,cpu-migrations,page-faults,syscalls:sys_enter_pwrite64'
if (PERF_FILE || PERF_STAT) {
  // LATENCY_AB_PERF_EVENT records another event than CPU time, e.g. `page-faults`.
  const event = process.env.LATENCY_AB_PERF_EVENT
  const sampling = event ? ['-e', event] : ['-F', '2999']
  const what = PERF_STAT ? ['stat', '-e', STAT_EVENTS] : ['record', ...sampling, '-g', '-o', PERF_FILE!]
  perf = spawn('perf', [...what, '-p', String(thisAgent)], { stdio: ['ignore', 'ignore', 'pipe'] })
  perf.stderr!.setEncoding('utf8')
  let report = ''
  perf.stderr!.on('data', (text: string) => {
    report += text
  })
  perf.on('exit', () => console.log(perStatReport(report)))
  // perf attaches asynchronously; give it a moment before the first measured run.
  await new Promise((resolve) => setTimeout(resolve, 500))
}

for (let round = 0; round < ROUNDS; round++) {
  const order = [...sides.keys()]
  for (let i = 0; i < round % (sides.length + 1); i++) order.push(order.shift()!)
  const bareSamples: number[][] = []
  const productSamples = new Map<number, number[]>()
  /** Each side's agent CPU per run in this round (us): shows how far the agent is from warm. */
  const agentRound = new Map<number, number>()
  /** Each side's runner CPU per run in this round (us). */
  const runnerRound = new Map<number, number>()
  await sequential(30, () => bare.run(COMMAND))
  bareSamples.push(
    await measured(barePids, bareCpu, bareIo, BARE_RUNS_PER_LOAD, () =>
      load(RUNS / 2, () => bare.run(COMMAND)),
    ),
  )
  for (const i of order) {
    const side = sides[i]!
    await sequential(30, side.run)
    const agentBefore = side.cpu.agent ?? 0
    const runnerBefore = side.cpu.runner ?? 0
    productSamples.set(
      i,
      await measured(side.pids, side.cpu, side.io, RUNS_PER_LOAD, () => load(RUNS, side.run)),
    )
    agentRound.set(i, ((side.cpu.agent ?? 0) - agentBefore) * 1000)
    runnerRound.set(i, ((side.cpu.runner ?? 0) - runnerBefore) * 1000)
  }
  bareSamples.push(
    await measured(barePids, bareCpu, bareIo, BARE_RUNS_PER_LOAD, () =>
      load(RUNS / 2, () => bare.run(COMMAND)),
    ),
  )
  const ref = bareSamples.flat()
  bareRounds.push(ref)
  const b50 = percentile(ref, 50)
  const b90 = percentile(ref, 90)
  const line = [`round ${round + 1}: bare p50 ${b50.toFixed(3)} p90 ${b90.toFixed(3)}`]
  for (const [i, samples] of productSamples) {
    const p50 = percentile(samples, 50)
    const p90 = percentile(samples, 90)
    sides[i]!.rounds.push({ p50, p90, r50: p50 / b50, r90: p90 / b90 })
    line.push(
      `${sides[i]!.name} p50 ${p50.toFixed(3)} (${(p50 / b50).toFixed(2)}x) p90 ${p90.toFixed(3)} (${(p90 / b90).toFixed(2)}x) agent ${agentRound.get(i)!.toFixed(0)} us runner ${runnerRound.get(i)!.toFixed(1)} us`,
    )
  }
  if (PIPELINED > 0)
    for (const [i, samples] of productSamples)
      line.push(`${sides[i]!.name} throughput ${(b50 / samples[0]!).toFixed(3)}x bare`)
  console.log(line.join(' | '))
}

if (perf) {
  perf.kill('SIGINT')
  await once(perf, 'exit')
  if (PERF_FILE) console.log(`agent ${thisAgent} profiled: perf report -i ${PERF_FILE} --no-children`)
}
console.log(
  `bare two-hop: p50 ${median(bareRounds.map((r) => percentile(r, 50))).toFixed(3)} ms, p90 ${median(bareRounds.map((r) => percentile(r, 90))).toFixed(3)} ms`,
)
const perRun = (cpu: Record<string, number>): string =>
  Object.entries(cpu)
    .map(([k, ms]) => `${k} ${((ms / ROUNDS) * 1000).toFixed(0)} us`)
    .join(', ')
console.log(`bare two-hop CPU per run: ${perRun(bareCpu)}`)
for (const side of sides) console.log(`${side.name} CPU per run: ${perRun(side.cpu)}`)
const ioPerRun = (io: Record<string, number[]>): string =>
  Object.entries(io)
    .map(
      ([k, [r, w, v]]) =>
        `${k} ${(r! / ROUNDS).toFixed(2)}/${(w! / ROUNDS).toFixed(2)}/${(v! / ROUNDS).toFixed(2)}`,
    )
    .join(', ')
console.log(`bare two-hop reads/writes/wake-ups per run: ${ioPerRun(bareIo)}`)
for (const side of sides) console.log(`${side.name} reads/writes/wake-ups per run: ${ioPerRun(side.io)}`)
for (const side of sides) {
  const r = side.rounds
  console.log(
    `${side.name}: p50 ${median(r.map((x) => x.p50)).toFixed(3)} ms = ${median(r.map((x) => x.r50)).toFixed(2)}x bare, p90 ${median(r.map((x) => x.p90)).toFixed(3)} ms = ${median(r.map((x) => x.r90)).toFixed(2)}x bare`,
  )
}
for (const side of sides) await side.dispose()
await bare[Symbol.asyncDispose]()
process.exit(0)
