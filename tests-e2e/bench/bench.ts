// `pnpm bench`: the full-stack benchmark. It boots the real runner CLI (as the e2e suite
// does), drives it through `@conch/sdk`, and measures, in rounds, every figure next to a
// reference measured in the same round: a bare Node client talking to one bash over pipes.
// Each figure is the median of its rounds; comparisons are interleaved inside each round, so
// a noisy neighbour slows both sides of a ratio. Numbers only: nothing here passes or fails.
//
// Output: a table on stdout and bench/results/latest.json (shape in bench/README.md).
// BENCH_QUICK=1 shrinks every workload; the BENCH_* variables below override single ones.
// Each phase is in phases/ (one file each), measuring with the run's shared BenchContext; this
// file starts the runner and the references, runs the phases round by round, and reports.

import { join } from 'node:path'
import { Sandbox } from '@conch/sdk'
import { startRunner } from '../harness/runner-process.ts'
import { BareTwoHop } from './bare-two-hop.ts'
import { CONFIG, PHASES, PROFILE_DIR, QUICK, RESULTS_DIR, WARM_POOL } from './bench-config.ts'
import { assertExit, type BenchContext } from './bench-context.ts'
import {
  type FullBenchReport,
  formatTable,
  machineInfo,
  readForeignResults,
  writeReport,
} from './bench-report.ts'
import { density } from './density.ts'
import { Figures } from './figures.ts'
import { firstRuns } from './first-runs.ts'
import { startPackagedRunner } from './packaged-runner.ts'
import { log, PhaseRunner } from './phase-runner.ts'
import { latencyPhase } from './phases/latency.ts'
import { memoryPhase } from './phases/memory.ts'
import { parallelPhase } from './phases/parallel.ts'
import { pipeliningPhase } from './phases/pipelining.ts'
import { startupPhase } from './phases/startup.ts'
import { streamingPhase } from './phases/streaming.ts'
import { PipeShell } from './pipe-shell.ts'
import { RUNNER_MODE, runnerEntry } from './runner-entry.ts'
import { soak } from './soak.ts'
import { poolFull } from './warm-pool.ts'

const phases = new PhaseRunner(Date.now() + CONFIG.deadlineMs)
const figures = new Figures()

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

  const ctx: BenchContext = { runner, connection, sb, sh, pipe, bare, figures }

  for (let round = 0; round < CONFIG.rounds; round++) {
    log(`round ${round + 1} of ${CONFIG.rounds}`)

    await phases.phase('latency', round, () => latencyPhase(ctx))
    await phases.phase('pipelining', round, () => pipeliningPhase(ctx))
    await phases.phase('parallel', round, () => parallelPhase(ctx))
    await phases.phase('streaming', round, () => streamingPhase(ctx))
    await phases.phase('memory', round, () => memoryPhase(ctx))

    // Once, not per round: a soak is one long window, and its slopes need the whole of it.
    if (round === 0) {
      // Its own runner, started as shipped (the bin with its node flags and idle release).
      await phases.phase('soak', round, async () => {
        await using packaged = await startPackagedRunner({ args: ['--log-level', 'warn'] })
        await soak(
          packaged,
          { url: packaged.url, apiKey: packaged.apiKey, env: { ...packaged.sandboxEnv } },
          CONFIG.soak,
          (name, unit, value, ref) => figures.recordValue('soak', name, unit, value, ref),
          log,
        )
      })
    }

    // Once: N sandbox starts are slow, and idle memory does not vary between rounds.
    if (round === 0) {
      await phases.phase('density', round, () =>
        density(
          runner,
          connection,
          CONFIG.densitySandboxes,
          (name, unit, value, ref) => figures.recordValue('density', name, unit, value, ref),
          log,
        ),
      )
    }

    // A new sandbox's first runs against its own warm runs (first-runs.ts); opt-in (slow).
    await phases.phase('first-runs', round, () =>
      firstRuns({
        runner,
        connection,
        poolFull: () => poolFull(runner, sb.info.driver),
        bare,
        count: CONFIG.sequentialRuns,
        warm: CONFIG.warmupRuns * 3,
        record: (name, unit, value, ref) => figures.recordValue('first-runs', name, unit, value, ref),
      }),
    )

    await phases.phase('startup', round, () => startupPhase(ctx))
  }

  await sb.destroy()
  // A stopping runner destroys its warm pool (a killed one would leave it, disks mounted), and a
  // profile is written when node exits normally: stop the runner gracefully.
  await runner.kill('SIGTERM')

  const results = figures.summarize()
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
  if (phases.failures.length > 0) {
    console.log(`\n${phases.failures.length} phase(s) failed and are missing from the table:`)
    for (const failure of phases.failures) console.log(`- ${failure.split('\n')[0]}`)
  }
}

await main()
// Sockets and timers of the SDK may keep the loop alive; the report is written, so end here.
process.exit(0)
