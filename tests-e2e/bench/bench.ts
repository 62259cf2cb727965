// `pnpm bench`: the full-stack benchmark. It boots the real runner CLI (as the e2e suite
// does), drives it through `@conch/sdk`, and measures, in rounds, every figure next to a
// reference measured in the same round: a bare Node client talking to one bash over pipes.
// Each figure is the median of its rounds; comparisons are interleaved inside each round, so
// a noisy neighbour slows both sides of a ratio. Numbers only: nothing here passes or fails.
//
// Output: a table on stdout and bench/results/latest.json (shape in bench/README.md).
// BENCH_QUICK=1 shrinks every workload; the BENCH_* variables below override single ones.

import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import type { BenchGoal, BenchResult } from '@conch/protocol'
import { Sandbox, type Shell } from '@conch/sdk'
import { REPO_ROOT, type RunnerProcess, startRunner } from '../harness/runner-process.ts'
import { BareTwoHop } from './bare-two-hop.ts'
import {
  type FullBenchReport,
  formatTable,
  machineInfo,
  readForeignResults,
  writeReport,
} from './bench-report.ts'
import { density } from './density.ts'
import { firstRuns } from './first-runs.ts'
import { startPackagedRunner } from './packaged-runner.ts'
import { childPids, perRunShares } from './per-run-cost.ts'
import { PipeShell } from './pipe-shell.ts'
import { cpuMs } from './proc-cpu.ts'
import { peakRssBytes, pssBytes, RssSampler, resetPeak, rssBytes, sandboxProcesses } from './proc-memory.ts'
import { soak } from './soak.ts'
import { median, type Quantiles, quantiles } from './stats.ts'

const QUICK = process.env.BENCH_QUICK === '1'

function setting(name: string, full: number, quick: number): number {
  const raw = process.env[name]
  if (raw !== undefined && raw !== '') {
    const value = Number(raw)
    if (!Number.isFinite(value) || value <= 0)
      throw new Error(`${name} must be a positive number, got "${raw}"`)
    return value
  }
  return QUICK ? quick : full
}

const CONFIG = {
  rounds: setting('BENCH_ROUNDS', 3, 3),
  sequentialRuns: setting('BENCH_SEQUENTIAL_RUNS', 2000, 300),
  execRuns: setting('BENCH_EXEC_RUNS', 2000, 40),
  warmupRuns: setting('BENCH_WARMUP_RUNS', 100, 20),
  pipelined: [100, setting('BENCH_PIPELINED_MAX', 2000, 2000)],
  parallelSessions: setting('BENCH_PARALLEL_SESSIONS', 100, 20),
  parallelCommands: setting('BENCH_PARALLEL_COMMANDS', 200, 50),
  streamBytes: setting('BENCH_STREAM_BYTES', 1024 ** 3, 64 * 1024 ** 2),
  idleSessions: setting('BENCH_IDLE_SESSIONS', 1000, 100),
  startupRounds: setting('BENCH_STARTUP_ROUNDS', 5, 3),
  // The agent caps sessions per sandbox at the protocol default (64) whatever the runner's
  // flag says, so many sessions are spread over several sandboxes.
  sessionsPerSandbox: setting('BENCH_SESSIONS_PER_SANDBOX', 60, 60),
  deadlineMs: setting('BENCH_DEADLINE_MS', 540_000, 240_000),
  soak: {
    // Long enough that each agent's scrollback and heap reach their steady size within the
    // warm-up (the first half) on a 2-core machine; the slope after it is then retention.
    sandboxes: setting('BENCH_SOAK_SANDBOXES', 2, 2),
    sessions: setting('BENCH_SOAK_SESSIONS', 2, 2),
    depth: setting('BENCH_SOAK_DEPTH', 8, 4),
    seconds: setting('BENCH_SOAK_SECONDS', 240, 20),
    settleSeconds: setting('BENCH_SOAK_SETTLE_SECONDS', 30, 5),
  },
  densitySandboxes: setting('BENCH_DENSITY_SANDBOXES', 100, 20),
}

/** Phases to run (comma-separated names); all when unset. */
const PHASES = new Set((process.env.BENCH_PHASES ?? '').split(',').filter((p) => p !== ''))
/** Phases that run only when BENCH_PHASES names them (slow). */
const OPT_IN_PHASES = new Set(['density', 'first-runs'])
/** When set, the runner and the agents write V8 CPU profiles into this directory. */
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE_DIR

const RESULTS_DIR = join(REPO_ROOT, 'bench/results')
/** The runner's warm pool size; the startup phase takes from it and creates cold beside it. */
const WARM_POOL = 2
const MB = 1e6
const KB = 1024

// ---- figures ----------------------------------------------------------------------------

interface Figure {
  group: string
  name: string
  unit: string
  /** Name of the figure this one is divided by for `ratioToBaseline`. */
  ref?: string
  /** The project's goal for this figure. */
  goal?: BenchGoal
  values: number[]
  quantiles: Quantiles[]
}

const figures = new Map<string, Figure>()

function figure(group: string, name: string, unit: string, ref?: string): Figure {
  let f = figures.get(name)
  if (!f) {
    f = { group, name, unit, values: [], quantiles: [] }
    if (ref !== undefined) f.ref = ref
    figures.set(name, f)
  }
  return f
}

function recordValue(group: string, name: string, unit: string, value: number, ref?: string): void {
  figure(group, name, unit, ref).values.push(value)
}

function recordLatency(group: string, name: string, samples: number[], ref?: string): Quantiles {
  const q = quantiles(samples)
  const f = figure(group, name, 'ms', ref)
  f.quantiles.push(q)
  f.values.push(q.p50)
  return q
}

/** Sets the goal of a figure already recorded (issue 12's performance goals). */
function setGoal(name: string, goal: BenchGoal): void {
  const f = figures.get(name)
  if (f) f.goal = goal
}

function summarize(): BenchResult[] {
  const results: BenchResult[] = []
  for (const f of figures.values()) {
    if (f.values.length === 0) continue
    const result: BenchResult = { group: f.group, name: f.name, unit: f.unit, value: median(f.values) }
    if (f.quantiles.length > 0) {
      result.p50 = median(f.quantiles.map((q) => q.p50))
      result.p90 = median(f.quantiles.map((q) => q.p90))
      result.p99 = median(f.quantiles.map((q) => q.p99))
    }
    const ref = f.ref === undefined ? undefined : figures.get(f.ref)
    if (ref && ref.values.length > 0) {
      const base = median(ref.values)
      if (base > 0) {
        result.ratioToBaseline = result.value / base
        result.reference = ref.name
      }
    }
    if (f.goal) result.goal = f.goal
    results.push(result)
  }
  return results
}

// ---- measuring helpers --------------------------------------------------------------------

async function sequential(runs: number, fn: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    await fn()
    samples.push(performance.now() - t0)
  }
  return samples
}

async function wallTime(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now()
  await fn()
  return performance.now() - t0
}

/** A fresh `bash -c` from Node: the floor of any per-command process spawn. */
function spawnBash(command: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.resume()
    child.stderr.resume()
    child.once('error', reject)
    child.once('close', () => resolve())
  })
}

async function inBatches<T>(count: number, width: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = []
  for (let start = 0; start < count; start += width) {
    const batch = Array.from({ length: Math.min(width, count - start) }, (_, k) => make(start + k))
    out.push(...(await Promise.all(batch)))
  }
  return out
}

/** Splits `count` sessions over sandboxes of at most `CONFIG.sessionsPerSandbox` each. */
function spread(count: number): number[] {
  const per = CONFIG.sessionsPerSandbox
  return Array.from({ length: Math.ceil(count / per) }, (_, i) => Math.min(per, count - i * per))
}

function assertExit(result: { exitCode: number }, what: string): void {
  if (result.exitCode !== 0) throw new Error(`${what} exited with ${result.exitCode}`)
}

/** A warm-pool figure from the runner's metrics, for `driver`; 0 when absent. */
async function poolMetric(
  runner: { url: string; apiKey: string },
  name: string,
  driver: string,
): Promise<number> {
  const res = await fetch(`${runner.url}/metrics`, { headers: { authorization: `Bearer ${runner.apiKey}` } })
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name}{driver="${driver}"}`))
  return line === undefined ? 0 : Number(line.split(' ').at(-1))
}

/**
 * Each process's CPU and wakeups per sequential `run('true')`, the product's beside the bare
 * two-hop's counterpart (per-run-cost.ts): which hop a latency ratio comes from.
 */
async function recordRunShares(
  runner: RunnerProcess,
  sb: Sandbox,
  sh: Shell,
  bare: BareTwoHop,
): Promise<void> {
  const runs = CONFIG.sequentialRuns
  const bareShares = await perRunShares(
    {
      client: [process.pid],
      relay: [bare.relayPid],
      holder: [bare.holderPid],
      bash: childPids(bare.holderPid),
    },
    runs,
    () => bare.run('true'),
  )
  const { agent, bashes } = sandboxProcesses(runner.sweepTarget, runner.pid, sb.id)
  const shares = await perRunShares(
    { client: [process.pid], runner: [runner.pid], agent: [agent], bash: bashes },
    runs,
    () => sh.run('true'),
  )
  const pairs = [
    ['client (SDK)', shares.client, 'bare two-hop client', bareShares.client],
    ['runner', shares.runner, 'bare two-hop relay', bareShares.relay],
    ['agent', shares.agent, 'bare two-hop holder', bareShares.holder],
    ["the session's bash", shares.bash, "bare two-hop's bash", bareShares.bash],
  ] as const
  for (const [name, share, refName, ref] of pairs) {
    const cpuRef = `${refName}: CPU per run('true')`
    recordValue('reference', cpuRef, 'µs', ref.cpuUs)
    recordValue('per-run', `${name}: CPU per run('true')`, 'µs', share.cpuUs, cpuRef)
    const wakeRef = `${refName}: wakeups per run('true')`
    recordValue('reference', wakeRef, 'count', ref.wakeups)
    recordValue('per-run', `${name}: wakeups per run('true')`, 'count', share.wakeups, wakeRef)
  }
}

/** Waits until the runner's warm pool for `driver` is full (no refill under way). */
async function poolFull(runner: { url: string; apiKey: string }, driver: string): Promise<void> {
  const until = Date.now() + 60_000
  while ((await poolMetric(runner, 'conch_warm_pool_ready', driver)) < WARM_POOL) {
    if (Date.now() > until) throw new Error(`the warm pool of ${driver} did not fill within 60 s`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

// ---- the benchmark ------------------------------------------------------------------------

const deadline = Date.now() + CONFIG.deadlineMs
const failures: string[] = []
const failedPhases = new Set<string>()

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`)
}

async function phase(name: string, round: number, fn: () => Promise<void>): Promise<void> {
  if (failedPhases.has(name) || ((PHASES.size > 0 || OPT_IN_PHASES.has(name)) && !PHASES.has(name))) return
  if (round > 0 && Date.now() > deadline) {
    log(`${name}: skipping round ${round + 1}, past the time budget`)
    return
  }
  const t0 = performance.now()
  try {
    await fn()
    log(`${name}: round ${round + 1} in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  } catch (err) {
    failedPhases.add(name)
    const message = err instanceof Error ? (err.stack ?? err.message) : String(err)
    failures.push(`${name}: ${message}`)
    log(`${name} failed: ${message}`)
  }
}

/**
 * How the main runner starts. `dist` (the default): the built package (`pnpm build` of the
 * runner, run here first), through its bin with its node flags, malloc settings and idle
 * release, and with the agent bundle it ships: what users run, so the RSS rows of the goals
 * table describe it. `bin`: the bin from sources (Node strips the types, which costs memory the
 * package does not). `source`: `main.ts` from sources without the bin (the e2e harness's runner).
 */
const RUNNER_MODE = process.env.BENCH_RUNNER ?? 'dist'

/** The main runner's entry file for `RUNNER_MODE`; builds the package for `dist`. */
function runnerEntry(): string | undefined {
  if (RUNNER_MODE === 'source') return undefined
  if (RUNNER_MODE === 'bin') return join(REPO_ROOT, 'packages/runner/src/bin.ts')
  if (RUNNER_MODE !== 'dist')
    throw new Error(`BENCH_RUNNER must be dist, bin or source, got "${RUNNER_MODE}"`)
  const runnerDir = join(REPO_ROOT, 'packages/runner')
  const built = join(runnerDir, 'dist/conch.js')
  // Rebuilt only when a source is newer: every build's files are new to the namespace driver's
  // runtime image cache (keyed by the files' mtimes), which would make and mount one more image.
  const sources = ['runner', 'agent', 'link', 'protocol'].map((p) => join(REPO_ROOT, 'packages', p, 'src'))
  if (!existsSync(built) || Math.max(...sources.map(newestMtime)) > statSync(built).mtimeMs) {
    const build = spawnSync(process.execPath, ['--conditions=source', 'scripts/build.ts'], {
      cwd: runnerDir,
      encoding: 'utf8',
    })
    if (build.status !== 0) throw new Error(`building the runner failed: ${build.stderr}`)
  }
  return built
}

/** The newest modification time of any file under `dir`. */
function newestMtime(dir: string): number {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs)
  }
  return newest
}

async function main(): Promise<void> {
  log(`config ${JSON.stringify(CONFIG)}`)
  const entry = runnerEntry()
  await using runner = await startRunner({
    ...(entry ? { entry } : {}),
    args: [
      '--max-sandboxes',
      String(
        Math.max(
          Math.ceil(Math.max(CONFIG.idleSessions, CONFIG.parallelSessions) / CONFIG.sessionsPerSandbox),
          PHASES.has('density') ? CONFIG.densitySandboxes : 0,
        ) + 8,
      ),
      '--max-queued-runs-per-sandbox',
      String(Math.max(...CONFIG.pipelined) * 2 + CONFIG.parallelSessions * 2),
      '--log-level',
      'warn',
      '--warm-pool',
      String(WARM_POOL),
    ],
    nodeArgs: PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [],
  })
  const sandboxEnv: Record<string, string> = { ...runner.sandboxEnv }
  if (PROFILE_DIR) sandboxEnv.NODE_OPTIONS = `--cpu-prof --cpu-prof-dir=${PROFILE_DIR}`
  const connection = { url: runner.url, apiKey: runner.apiKey, env: sandboxEnv }
  const sb = await Sandbox.create(connection)
  const sh = await sb.shell()
  await using pipe = new PipeShell()
  await using bare = await BareTwoHop.start()
  assertExit(await sh.run('true'), 'first run')

  for (let round = 0; round < CONFIG.rounds; round++) {
    log(`round ${round + 1} of ${CONFIG.rounds}`)

    await phase('latency', round, async () => {
      for (const command of ['true', 'echo hi']) {
        await sequential(CONFIG.warmupRuns, () => bare.run(command))
        await sequential(CONFIG.warmupRuns, () => pipe.run(command))
        await sequential(CONFIG.warmupRuns, () => sh.run(command))
        await sequential(Math.ceil(CONFIG.warmupRuns / 10), () => sb.exec(command))

        const twoHop = `bare two-hop: ${command}`
        recordLatency('reference', twoHop, await sequential(CONFIG.sequentialRuns, () => bare.run(command)))
        const ref = `bash over pipes: ${command}`
        recordLatency('reference', ref, await sequential(CONFIG.sequentialRuns, () => pipe.run(command)))
        const shellSamples = await sequential(CONFIG.sequentialRuns, () => sh.run(command))
        const shell = recordLatency('latency', `shell.run('${command}')`, shellSamples, ref)
        if (command === 'true') {
          const name = `shell.run('${command}') vs bare two-hop`
          recordLatency('goals', name, shellSamples, twoHop)
          setGoal(name, { bound: 'max', of: 'ratio', limit: 1 })
          await recordRunShares(runner, sb, sh, bare)
        }
        recordLatency(
          'reference',
          `fresh bash -c from Node: ${command}`,
          await sequential(CONFIG.execRuns, () => spawnBash(command)),
        )
        const exec = recordLatency(
          'latency',
          `sb.exec('${command}')`,
          await sequential(CONFIG.execRuns, () => sb.exec(command)),
          ref,
        )
        recordValue('latency', `exec/shell p50 ratio ('${command}')`, 'x', exec.p50 / shell.p50)
      }
    })

    await phase('pipelining', round, async () => {
      const max = Math.max(...CONFIG.pipelined)
      const twoHopRate = `bare two-hop: ${max} pipelined, throughput`
      const twoHopWall = await wallTime(() =>
        Promise.all(Array.from({ length: max }, () => bare.run('true'))),
      )
      recordValue('reference', twoHopRate, 'cmds/s', (max / twoHopWall) * 1000)
      const goalWall = await wallTime(() => Promise.all(Array.from({ length: max }, () => sh.run('true'))))
      const goalName = `${max} pipelined shell.run('true') on one shell vs bare two-hop, throughput`
      recordValue('goals', goalName, 'cmds/s', (max / goalWall) * 1000, twoHopRate)
      setGoal(goalName, { bound: 'min', of: 'ratio', limit: 0.8 })
      for (const n of CONFIG.pipelined) {
        const refWall = `bash over pipes: ${n} pipelined, wall`
        const refRate = `bash over pipes: ${n} pipelined, throughput`
        const pipeWall = await wallTime(() => Promise.all(Array.from({ length: n }, () => pipe.run('true'))))
        recordValue('reference', refWall, 'ms', pipeWall)
        recordValue('reference', refRate, 'cmds/s', (n / pipeWall) * 1000)
        const shellWall = await wallTime(() => Promise.all(Array.from({ length: n }, () => sh.run('true'))))
        recordValue('pipelining', `${n} pipelined shell.run('true'), wall`, 'ms', shellWall, refWall)
        recordValue(
          'pipelining',
          `${n} pipelined shell.run('true'), throughput`,
          'cmds/s',
          (n / shellWall) * 1000,
          refRate,
        )
      }
    })

    await phase('parallel', round, async () => {
      const p = CONFIG.parallelSessions
      const c = CONFIG.parallelCommands
      const label = `${p} sessions x ${c} commands`

      const pipes = Array.from({ length: p }, () => new PipeShell())
      try {
        await Promise.all(pipes.map((ps) => ps.run('true')))
        const refSamples: number[] = []
        const refWall = await wallTime(() =>
          Promise.all(
            pipes.map(async (ps) => refSamples.push(...(await sequential(c, () => ps.run('true'))))),
          ),
        )
        recordValue(
          'reference',
          `bash over pipes: ${label}, throughput`,
          'cmds/s',
          ((p * c) / refWall) * 1000,
        )
        recordLatency('reference', `bash over pipes: ${label}, latency`, refSamples)
      } finally {
        await Promise.all(pipes.map((ps) => ps[Symbol.asyncDispose]()))
      }

      const boxes: Sandbox[] = []
      try {
        const shells: Shell[] = []
        for (const n of spread(p)) {
          const box = await Sandbox.create(connection)
          boxes.push(box)
          shells.push(...(await inBatches(n, 16, () => box.shell())))
        }
        await Promise.all(shells.map((s) => s.run('true')))
        const samples: number[] = []
        const wall = await wallTime(() =>
          Promise.all(shells.map(async (s) => samples.push(...(await sequential(c, () => s.run('true')))))),
        )
        recordValue(
          'parallel',
          `${label}, throughput`,
          'cmds/s',
          ((p * c) / wall) * 1000,
          `bash over pipes: ${label}, throughput`,
        )
        recordLatency('parallel', `${label}, latency`, samples, `bash over pipes: ${label}, latency`)
        for (const s of shells) s.close()
      } finally {
        await Promise.all(boxes.map((box) => box.destroy()))
      }
    })

    await phase('streaming', round, async () => {
      const bytes = CONFIG.streamBytes
      const size =
        bytes % 1024 ** 3 === 0
          ? `${bytes / 1024 ** 3}G`
          : bytes % 1024 ** 2 === 0
            ? `${bytes / 1024 ** 2}M`
            : `${bytes}`
      const label = `head -c ${size} /dev/zero`
      const before = pipe.bytesOut
      const refMs = await wallTime(() => pipe.run(`head -c ${bytes} /dev/zero`))
      const refGot = pipe.bytesOut - before
      recordValue('reference', `bash over pipes: ${label}`, 'MB/s', refGot / MB / (refMs / 1000))

      // The bare two-hop's relay is a bare Node holding a WebSocket: the runner's memory reference.
      recordValue('reference', 'bare two-hop relay RSS, idle', 'MB', rssBytes(bare.relayPid) / MB)
      const relayPeakResettable = resetPeak(bare.relayPid)
      const relaySampler = new RssSampler([bare.relayPid])
      const bareBefore = bare.bytesOut
      const bareMs = await wallTime(() => bare.run(`head -c ${bytes} /dev/zero`))
      const relaySampled = relaySampler.stop()
      recordValue(
        'reference',
        `bare two-hop: ${label}`,
        'MB/s',
        (bare.bytesOut - bareBefore) / MB / (bareMs / 1000),
      )
      recordValue(
        'reference',
        'bare two-hop relay peak RSS while streaming',
        'MB',
        Math.max(
          relaySampled.get(bare.relayPid) ?? 0,
          relayPeakResettable ? peakRssBytes(bare.relayPid) : 0,
        ) / MB,
      )

      const { agent } = sandboxProcesses(runner.sweepTarget, runner.pid, sb.id)
      recordValue(
        'streaming',
        'runner RSS before streaming',
        'MB',
        rssBytes(runner.pid) / MB,
        'bare two-hop relay RSS, idle',
      )
      setGoal('runner RSS before streaming', { bound: 'max', of: 'value', limit: 100 })
      recordValue('streaming', 'agent RSS before streaming', 'MB', rssBytes(agent) / MB)
      const peaksResettable = resetPeak(runner.pid) && resetPeak(agent)
      const sampler = new RssSampler([runner.pid, agent])
      const cpuBefore = { runner: cpuMs(runner.pid), agent: cpuMs(agent), client: cpuMs(process.pid) }
      let received = 0
      let code = -1
      const ms = await wallTime(async () => {
        // A loaded machine may take longer than the session's 30 s default timeout for 1 GB.
        for await (const event of sh.stream(`head -c ${bytes} /dev/zero`, { timeoutMs: 600_000 })) {
          if (event.type === 'exit') code = event.exitCode
          else received += event.data.length
        }
      })
      const sampled = sampler.stop()
      const mib = bytes / 1024 ** 2
      recordValue(
        'streaming',
        'runner CPU per MiB streamed',
        'ms',
        (cpuMs(runner.pid) - cpuBefore.runner) / mib,
      )
      recordValue('streaming', 'agent CPU per MiB streamed', 'ms', (cpuMs(agent) - cpuBefore.agent) / mib)
      recordValue(
        'streaming',
        'client (SDK) CPU per MiB streamed',
        'ms',
        (cpuMs(process.pid) - cpuBefore.client) / mib,
      )
      if (code !== 0 || received !== bytes)
        throw new Error(`stream got ${received} of ${bytes} bytes, exit ${code}`)
      recordValue(
        'streaming',
        `${label} through shell.stream`,
        'MB/s',
        bytes / MB / (ms / 1000),
        `bash over pipes: ${label}`,
      )
      setGoal(`${label} through shell.stream`, { bound: 'min', of: 'ratio', limit: 0.5 })
      const peak = (pid: number): number =>
        Math.max(sampled.get(pid) ?? 0, peaksResettable ? peakRssBytes(pid) : 0) / MB
      recordValue(
        'streaming',
        'runner peak RSS while streaming',
        'MB',
        peak(runner.pid),
        'bare two-hop relay peak RSS while streaming',
      )
      setGoal('runner peak RSS while streaming', { bound: 'max', of: 'value', limit: 150 })
      recordValue('streaming', 'agent peak RSS while streaming', 'MB', peak(agent))
    })

    await phase('memory', round, async () => {
      const k = CONFIG.idleSessions
      const bareBash = rssBytes(pipe.pid)
      recordValue('reference', 'bare bash RSS', 'KB', bareBash / KB)
      recordValue('reference', 'bare bash PSS', 'KB', pssBytes(pipe.pid) / KB)

      const plan = spread(k)
      const boxes: Sandbox[] = []
      try {
        for (const _ of plan) {
          const box = await Sandbox.create(connection)
          boxes.push(box)
          assertExit(await box.exec('true', { sessionId: 'default' }), 'default session')
        }
        const starts = boxes.map((box) => sandboxProcesses(runner.sweepTarget, runner.pid, box.id))
        const runnerBefore = rssBytes(runner.pid)
        const agentsBefore = starts.map((start) => rssBytes(start.agent))
        for (const [i, box] of boxes.entries()) await inBatches(plan[i]!, 16, () => box.createSession())
        const runnerDelta = (rssBytes(runner.pid) - runnerBefore) / k
        let agentGrowth = 0
        const added: number[] = []
        for (const [i, box] of boxes.entries()) {
          const after = sandboxProcesses(runner.sweepTarget, runner.pid, box.id)
          agentGrowth += rssBytes(after.agent) - agentsBefore[i]!
          added.push(...after.bashes.filter((pid) => !starts[i]!.bashes.includes(pid)))
        }
        if (added.length < k) throw new Error(`expected ${k} new bash processes, found ${added.length}`)
        const agentDelta = agentGrowth / k
        const bashRss = added.reduce((sum, pid) => sum + rssBytes(pid), 0) / added.length
        const bashPss = added.reduce((sum, pid) => sum + pssBytes(pid), 0) / added.length
        const sessions = `${k} sessions over ${boxes.length} sandboxes`
        recordValue(
          'memory',
          `idle session: runner RSS per session (${sessions})`,
          'KB',
          runnerDelta / KB,
          'bare bash RSS',
        )
        recordValue(
          'memory',
          `idle session: agent RSS per session (${sessions})`,
          'KB',
          agentDelta / KB,
          'bare bash RSS',
        )
        recordValue(
          'memory',
          'idle session: overhead beyond bash (runner + agent)',
          'KB',
          (runnerDelta + agentDelta) / KB,
          'bare bash RSS',
        )
        recordValue('memory', 'idle session: bash RSS', 'KB', bashRss / KB, 'bare bash RSS')
        recordValue('memory', 'idle session: bash PSS', 'KB', bashPss / KB, 'bare bash PSS')
      } finally {
        await Promise.all(boxes.map((box) => box.destroy()))
      }
    })

    // Once, not per round: a soak is one long window, and its slopes need the whole of it.
    if (round === 0) {
      // Its own runner, started as shipped (the bin with its node flags and idle release).
      await phase('soak', round, async () => {
        await using packaged = await startPackagedRunner({ args: ['--log-level', 'warn'] })
        await soak(
          packaged,
          { url: packaged.url, apiKey: packaged.apiKey, env: { ...packaged.sandboxEnv } },
          CONFIG.soak,
          (name, unit, value, ref) => recordValue('soak', name, unit, value, ref),
          log,
        )
      })
    }

    // Once: N sandbox starts are slow, and idle memory does not vary between rounds.
    if (round === 0) {
      await phase('density', round, () =>
        density(
          runner,
          connection,
          CONFIG.densitySandboxes,
          (name, unit, value, ref) => recordValue('density', name, unit, value, ref),
          log,
        ),
      )
    }

    // A new sandbox's first runs against its own warm runs (first-runs.ts); opt-in (slow).
    await phase('first-runs', round, () =>
      firstRuns({
        runner,
        connection,
        poolFull: () => poolFull(runner, sb.info.driver),
        bare,
        count: CONFIG.sequentialRuns,
        warm: CONFIG.warmupRuns * 3,
        record: (name, unit, value, ref) => recordValue('first-runs', name, unit, value, ref),
      }),
    )

    await phase('startup', round, async () => {
      const runs = Math.max(1, Math.round(CONFIG.startupRounds / CONFIG.rounds))
      const driver = sb.info.driver
      for (let i = 0; i < runs; i++) {
        let fresh: PipeShell | undefined
        const refMs = await wallTime(async () => {
          fresh = new PipeShell()
          await fresh.run('true')
        })
        await fresh?.[Symbol.asyncDispose]()
        recordValue('reference', 'bash over pipes: spawn to first result', 'ms', refMs)

        let twoHop: BareTwoHop | undefined
        const twoHopMs = await wallTime(async () => {
          twoHop = await BareTwoHop.start()
        })
        await twoHop?.[Symbol.asyncDispose]()
        recordValue('reference', 'bare two-hop: start to first result', 'ms', twoHopMs)

        // Cold: the sandbox env (the sweep marker) is one the warm pool does not hold. The pool is
        // full first, so no refill competes with the measurement.
        await poolFull(runner, driver)
        let box: Sandbox | undefined
        const ms = await wallTime(async () => {
          box = await Sandbox.create(connection)
          const first = await box.shell()
          assertExit(await first.run('true'), 'first run')
        })
        await box?.destroy()
        recordValue(
          'startup',
          'sandbox create to first shell.run result',
          'ms',
          ms,
          'bash over pipes: spawn to first result',
        )
        const cold = 'sandbox create (cold) to first shell.run result vs bare two-hop start'
        recordValue('goals', cold, 'ms', ms, 'bare two-hop: start to first result')
        setGoal(cold, { bound: 'max', of: 'value', limit: 100 })

        // Warm: default options, taken from the pool.
        await poolFull(runner, driver)
        const hits = await poolMetric(runner, 'conch_warm_pool_hits_total', driver)
        let pooled: Sandbox | undefined
        let createMs = 0
        const warmMs = await wallTime(async () => {
          createMs = await wallTime(async () => {
            pooled = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
          })
          const first = await pooled!.shell()
          assertExit(await first.run('true'), 'first run')
        })
        // The create request alone, and the rest (the shell socket, its attach, the first run).
        recordValue('startup', 'warm pool: the create request alone', 'ms', createMs)
        recordValue('startup', 'warm pool: shell() and the first run after it', 'ms', warmMs - createMs)
        await pooled?.destroy()
        if ((await poolMetric(runner, 'conch_warm_pool_hits_total', driver)) !== hits + 1)
          throw new Error('the warm-pool create was not served from the pool')
        const warm = 'sandbox create (warm pool) to first shell.run result vs bare two-hop start'
        recordValue('goals', warm, 'ms', warmMs, 'bare two-hop: start to first result')
        setGoal(warm, { bound: 'max', of: 'value', limit: 20 })
      }
    })
  }

  await sb.destroy()
  // A stopping runner destroys its warm pool (a killed one would leave it, disks mounted), and a
  // profile is written when node exits normally: stop the runner gracefully.
  await runner.kill('SIGTERM')

  const results = summarize()
  for (const name of ['agent', 'runner']) {
    const foreign = readForeignResults(join(RESULTS_DIR, `${name}.json`))
    if (foreign.length > 0) log(`merged ${foreign.length} figures from bench/results/${name}.json`)
    results.push(...foreign)
  }

  const report: FullBenchReport = {
    generatedAt: new Date().toISOString(),
    machine: machineInfo(),
    method:
      `Full stack: @conch/sdk -> runner CLI (${{ dist: 'the built package through its bin, as shipped', bin: 'its bin from sources (BENCH_RUNNER=bin)', source: 'main.ts from sources without the bin (BENCH_RUNNER=source)' }[RUNNER_MODE]}; ${sb.info.driver} driver, isolation ${sb.info.isolation}) -> agent -> bash, on one machine. ` +
      `${CONFIG.rounds} rounds; each figure is the median of its rounds, latency percentiles are per round ` +
      `(${CONFIG.sequentialRuns} sequential shell runs, ${CONFIG.execRuns} execs) and then the median across rounds. ` +
      'Every comparison is interleaved within a round: the reference (a bare Node client driving one bash over ' +
      'pipes with an end marker per command) is measured right before the figure it is compared with. ' +
      'ratioToBaseline = value / reference value (for throughputs, below 1 means slower than the reference). ' +
      `Streaming: ${CONFIG.streamBytes} bytes; idle memory: ${CONFIG.idleSessions} sessions; ` +
      `parallel: ${CONFIG.parallelSessions} sessions x ${CONFIG.parallelCommands} commands.` +
      (QUICK ? ' Quick mode (BENCH_QUICK=1): reduced workloads.' : ''),
    results,
  }
  if (PHASES.size > 0 || PROFILE_DIR) {
    console.log(formatTable(results))
    console.log('\npartial or profiled run: bench/results/latest.json left unchanged')
    return
  }
  const out = join(RESULTS_DIR, 'latest.json')
  writeReport(out, report)
  console.log(formatTable(results))
  console.log(`\nwrote ${out}`)
  if (failures.length > 0) {
    console.log(`\n${failures.length} phase(s) failed and are missing from the table:`)
    for (const failure of failures) console.log(`- ${failure.split('\n')[0]}`)
  }
}

await main()
// Sockets and timers of the SDK may keep the loop alive; the report is written, so end here.
process.exit(0)
