// What every phase of the benchmark measures with: the runner, one sandbox and shell kept
// for the whole run, the two references (bash over pipes and the bare two-hop), and the
// figures the phases record into.

import type { Sandbox, Shell } from '@conch/sdk'
import type { RunnerProcess } from '../harness/runner-process.ts'
import type { BareTwoHop } from './bare-two-hop.ts'
import type { Figures } from './figures.ts'
import type { PipeShell } from './pipe-shell.ts'

/** The shared state of one benchmark run, passed to each phase. */
export interface BenchContext {
  /** The runner under test. */
  runner: RunnerProcess
  /** How to reach it, with the env each new sandbox gets. */
  connection: { url: string; apiKey: string; env: Record<string, string> }
  /** The sandbox the single-shell phases use. */
  sb: Sandbox
  /** Its shell. */
  sh: Shell
  /** The reference: one bash over pipes. */
  pipe: PipeShell
  /** The reference for the product's two hops. */
  bare: BareTwoHop
  /** Where figures are recorded. */
  figures: Figures
}

/** Throws when a run a phase depends on did not succeed. */
export function assertExit(result: { exitCode: number }, what: string): void {
  if (result.exitCode !== 0) throw new Error(`${what} exited with ${result.exitCode}`)
}
