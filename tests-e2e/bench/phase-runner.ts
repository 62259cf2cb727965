// Runs the benchmark's phases: a phase runs when BENCH_PHASES names it (or, when it is unset,
// unless it is opt-in); a failed phase is recorded and skipped in later rounds, and no round
// after the first starts a phase past the time budget. Progress goes to stderr, the table to
// stdout.

import { performance } from 'node:perf_hooks'
import { OPT_IN_PHASES, PHASES } from './bench-config.ts'

/** Writes a progress line to stderr. */
export function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`)
}

/** The phases of one benchmark run and their failures. */
export class PhaseRunner {
  /** One line per failed phase: its name and error. */
  readonly failures: string[] = []
  readonly #failedPhases = new Set<string>()
  readonly #deadline: number

  /** A runner that starts no round after the first past `deadline` (a `Date.now()` time). */
  constructor(deadline: number) {
    this.#deadline = deadline
  }

  /** Runs round `round` of phase `name`, unless it is not selected, failed before or is late. */
  async phase(name: string, round: number, fn: () => Promise<void>): Promise<void> {
    if (this.#failedPhases.has(name) || ((PHASES.size > 0 || OPT_IN_PHASES.has(name)) && !PHASES.has(name)))
      return
    if (round > 0 && Date.now() > this.#deadline) {
      log(`${name}: skipping round ${round + 1}, past the time budget`)
      return
    }
    const t0 = performance.now()
    try {
      await fn()
      log(`${name}: round ${round + 1} in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    } catch (err) {
      this.#failedPhases.add(name)
      const message = err instanceof Error ? (err.stack ?? err.message) : String(err)
      this.failures.push(`${name}: ${message}`)
      log(`${name} failed: ${message}`)
    }
  }
}
