// The benchmark's settings: workload sizes from BENCH_* variables (BENCH_QUICK=1 shrinks
// every workload; a variable overrides a single one), which phases run, and the constants the
// phases share.

import { join } from 'node:path'
import { REPO_ROOT } from '../harness/runner-process.ts'

/** BENCH_QUICK=1: reduced workloads. */
export const QUICK = process.env.BENCH_QUICK === '1'

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

/** The workload sizes and time budget of this run. */
export const CONFIG = {
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
export const PHASES = new Set((process.env.BENCH_PHASES ?? '').split(',').filter((p) => p !== ''))
/** Phases that run only when BENCH_PHASES names them (slow). */
export const OPT_IN_PHASES = new Set(['density', 'first-runs'])
/** When set, the runner and the agents write V8 CPU profiles into this directory. */
export const PROFILE_DIR = process.env.BENCH_CPU_PROFILE_DIR

/** Where the report is written and other benchmarks' results are merged from. */
export const RESULTS_DIR = join(REPO_ROOT, 'bench/results')
/** The runner's warm pool size; the startup phase takes from it and creates cold beside it. */
export const WARM_POOL = 2
/** Bytes in a megabyte, for MB and MB/s figures. */
export const MB = 1e6
/** Bytes in a kibibyte, for KB figures. */
export const KB = 1024
