// The soak phase of `pnpm bench`: N sandboxes × K sessions run checked commands through the
// SDK for a fixed time while the runner's and every agent's RSS is sampled against the runs
// done so far. It reports runs, mismatches (a run whose output or exit code differs from what
// its command must produce; must be 0), errors, and the RSS slope per 100k runs of the agents
// and of the runner after a warm-up, each beside the same figure of a bare Node process holding
// one bash over pipes and running in the same window. The runner is the packaged one (the bench
// starts it through packaged-runner.ts). Before the load it measures an idle agent
// with one session and the idle runner; after it, the runner again once it has settled.
//
// Each session keeps `depth` checked runs in flight. The reference is paced to the runs of one
// agent, so its slope is over as many runs. Alone and short:
// BENCH_PHASES=soak BENCH_ROUNDS=1 BENCH_SOAK_SECONDS=20 pnpm --filter
// @conch/tests-e2e bench

import { AGENT_NODE_FLAGS } from '@conch/protocol'
import { type CreateSandboxOptions, Sandbox, type Shell } from '@conch/sdk'
import type { RunnerProcess } from '../harness/runner-process.ts'
import { PipeShellChild } from './pipe-shell-child.ts'
import { rssAnonBytes, rssBytes, sandboxProcesses } from './proc-memory.ts'

/** How big and how long the soak is. */
export interface SoakConfig {
  /** Sandboxes under load. */
  sandboxes: number
  /** Sessions per sandbox. */
  sessions: number
  /** Runs each session has in flight at once (queued in order in its shell). */
  depth: number
  /** Seconds of load. */
  seconds: number
  /** Seconds the runner gets after the load to give memory back. */
  settleSeconds: number
}

/** Records one figure; `ref` names the figure it is compared with. */
export type RecordFigure = (name: string, unit: string, value: number, ref?: string) => void

const MB = 1e6
const SAMPLE_MS = 500
/** The first half of the load is warm-up: scrollback and caches fill; slopes start after it. */
const WARMUP_SHARE = 0.5
/** Settling before an idle figure is read. */
const IDLE_SETTLE_MS = 3000

interface Sample {
  runs: number
  rss: number
}

/** Least-squares slope of RSS over runs, in MB per 100k runs; 0 with too few points. */
function slopePer100k(samples: Sample[]): number {
  const n = samples.length
  if (n < 3) return 0
  const mx = samples.reduce((s, p) => s + p.runs, 0) / n
  const my = samples.reduce((s, p) => s + p.rss, 0) / n
  let num = 0
  let den = 0
  for (const p of samples) {
    num += (p.runs - mx) * (p.rss - my)
    den += (p.runs - mx) ** 2
  }
  return den === 0 ? 0 : ((num / den) * 100_000) / MB
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Counts of one session's loop. */
interface LoopCounts {
  runs: number
  mismatches: number
  errors: number
}

/** Digits of the padded line a checked run writes besides its tag, so scrollback fills within the warm-up. */
const PAD_DIGITS = 512

/** Runs checked commands on one shell until `stop()` says so. */
async function checkedLoop(shell: Shell, tag: string, counts: LoopCounts, stop: () => boolean) {
  for (let i = 0; !stop(); i++) {
    try {
      const r = await shell.run(
        `printf '%s\\n' ${tag}-${i}; printf '%0${PAD_DIGITS}d\\n' ${i}; printf 'e%s' ${i} >&2; (exit $((${i} % 7)))`,
      )
      const stdout = `${tag}-${i}\n${String(i).padStart(PAD_DIGITS, '0')}\n`
      if (r.stdout !== stdout || r.stderr !== `e${i}` || r.exitCode !== i % 7) counts.mismatches += 1
      counts.runs += 1
    } catch {
      counts.errors += 1
      await sleep(50)
    }
  }
}

/** Runs the soak against a running runner and records its figures. */
export async function soak(
  runner: RunnerProcess,
  connection: CreateSandboxOptions,
  config: SoakConfig,
  record: RecordFigure,
  log: (message: string) => void,
): Promise<void> {
  await using reference = new PipeShellChild(AGENT_NODE_FLAGS)
  const boxes: Sandbox[] = []
  try {
    // Idle: one sandbox with one session, beside the reference holding its bash.
    const first = await Sandbox.create(connection)
    boxes.push(first)
    const firstShell = await first.shell()
    await firstShell.run('true')
    await reference.ready
    await sleep(IDLE_SETTLE_MS)
    const firstAgent = sandboxProcesses(runner.sweepTarget, runner.pid, first.id).agent
    const refIdle = rssBytes(reference.pid)
    record('reference: idle node holding a bash over pipes, RSS', 'MB', refIdle / MB)
    record('reference: idle node holding a bash over pipes, RssAnon', 'MB', rssAnonBytes(reference.pid) / MB)
    record(
      'idle agent with one session: RSS',
      'MB',
      rssBytes(firstAgent) / MB,
      'reference: idle node holding a bash over pipes, RSS',
    )
    record(
      'idle agent with one session: RssAnon',
      'MB',
      rssAnonBytes(firstAgent) / MB,
      'reference: idle node holding a bash over pipes, RssAnon',
    )
    record(
      'runner idle RSS',
      'MB',
      rssBytes(runner.pid) / MB,
      'reference: idle node holding a bash over pipes, RSS',
    )
    record(
      'runner idle RssAnon',
      'MB',
      rssAnonBytes(runner.pid) / MB,
      'reference: idle node holding a bash over pipes, RssAnon',
    )

    // Load: N sandboxes × K sessions, each session a loop of checked runs.
    for (let b = 1; b < config.sandboxes; b++) boxes.push(await Sandbox.create(connection))
    const shells = await Promise.all(
      boxes.map(async (box, b) => {
        const extra = Array.from({ length: b === 0 ? config.sessions - 1 : config.sessions }, () =>
          box.shell(),
        )
        return [...(b === 0 ? [firstShell] : []), ...(await Promise.all(extra))]
      }),
    )
    const agents = boxes.map((box) => sandboxProcesses(runner.sweepTarget, runner.pid, box.id).agent)
    const counts = shells.map((list) => list.map(() => ({ runs: 0, mismatches: 0, errors: 0 })))
    const boxRuns = (b: number) => counts[b]!.reduce((s, c) => s + c.runs, 0)
    const totalRuns = () => counts.reduce((s, _, b) => s + boxRuns(b), 0)

    const agentSamples: Sample[][] = agents.map(() => [])
    const runnerSamples: Sample[] = []
    const refSamples: Sample[] = []
    const started = performance.now()
    const endAt = started + config.seconds * 1000
    const warmupEnd = started + config.seconds * 1000 * WARMUP_SHARE
    // The reference is paced to the mean runs of one sandbox, so its slope is over as many runs.
    let paced = 0
    const sampler = setInterval(() => {
      const target = Math.floor(totalRuns() / boxes.length)
      reference.run(target - paced)
      paced = target
      if (performance.now() < warmupEnd) return
      for (const [b, pid] of agents.entries()) agentSamples[b]!.push({ runs: boxRuns(b), rss: rssBytes(pid) })
      runnerSamples.push({ runs: totalRuns(), rss: rssBytes(runner.pid) })
      refSamples.push({ runs: reference.runs, rss: rssBytes(reference.pid) })
    }, SAMPLE_MS)
    const agentStart = agents.map((pid) => rssBytes(pid))
    const runnerStart = rssBytes(runner.pid)
    const stop = () => performance.now() >= endAt
    await Promise.all(
      shells.flatMap((list, b) =>
        list.flatMap((shell, s) =>
          Array.from({ length: config.depth }, (_, d) =>
            checkedLoop(shell, `s${b}x${s}d${d}`, counts[b]![s]!, stop),
          ),
        ),
      ),
    )
    clearInterval(sampler)
    const seconds = (performance.now() - started) / 1000
    const all = counts.flat()
    const runs = all.reduce((s, c) => s + c.runs, 0)
    const mismatches = all.reduce((s, c) => s + c.mismatches, 0)
    const errors = all.reduce((s, c) => s + c.errors, 0)
    const agentEnd = agents.map((pid) => rssBytes(pid))
    log(`soak: ${runs} runs in ${seconds.toFixed(1)} s, ${mismatches} mismatches, ${errors} errors`)

    const shape = `${config.sandboxes} sandboxes × ${config.sessions} sessions × ${config.depth} in flight, ${config.seconds} s`
    record(`soak runs (${shape})`, 'runs', runs)
    record(`soak runs per second (${shape})`, 'runs/s', runs / seconds)
    record('soak mismatches (must be 0)', 'runs', mismatches)
    record('soak errors', 'runs', errors)
    record('soak runs per agent', 'runs', runs / boxes.length)
    record('reference runs in the same window (paced to one agent)', 'runs', reference.runs)
    const refSlope = 'reference: node + bash over pipes RSS slope per 100k runs'
    record(refSlope, 'MB', slopePer100k(refSamples))
    const agentSlopes = agentSamples.map(slopePer100k)
    record(
      'soak agent RSS slope per 100k runs (mean over agents, after warm-up)',
      'MB',
      agentSlopes.reduce((s, v) => s + v, 0) / agentSlopes.length,
      refSlope,
    )
    record('soak runner RSS slope per 100k runs (after warm-up)', 'MB', slopePer100k(runnerSamples), refSlope)
    record(
      'soak agent RSS at end of load (mean)',
      'MB',
      agentEnd.reduce((s, v) => s + v, 0) / agentEnd.length / MB,
      'reference: idle node holding a bash over pipes, RSS',
    )
    record(
      'soak agent RSS growth over the whole load, warm-up included (mean)',
      'MB',
      agentEnd.reduce((s, v, i) => s + v - agentStart[i]!, 0) / agentEnd.length / MB,
    )
    record('soak runner RSS at end of load', 'MB', rssBytes(runner.pid) / MB, 'runner idle RSS')
    record('soak runner RSS growth over the whole load', 'MB', (rssBytes(runner.pid) - runnerStart) / MB)

    await Promise.all(shells.flat().map((shell) => shell.close()))
    await sleep(config.settleSeconds * 1000)
    record(
      `runner RSS ${config.settleSeconds} s after the load`,
      'MB',
      rssBytes(runner.pid) / MB,
      'runner idle RSS',
    )
    record(
      `runner RssAnon ${config.settleSeconds} s after the load`,
      'MB',
      rssAnonBytes(runner.pid) / MB,
      'runner idle RssAnon',
    )
  } finally {
    await Promise.all(boxes.map((box) => box.destroy()))
  }
}
