import { z } from 'zod'

// The benchmark results file (`bench/results/*.json`): written by the agent, runner and
// full-stack benchmarks, read by the docs site's benchmark page. bench/README.md explains the
// method behind each figure.

/** A performance goal: a bound on a figure's ratio to its reference, or on its value. */
export const BenchGoal = z.object({
  /** `max`: the figure should be at most `limit`; `min`: at least. */
  bound: z.enum(['max', 'min']),
  /** What is bounded: `ratio` (`ratioToBaseline`) or `value` (in the figure's unit). */
  of: z.enum(['ratio', 'value']),
  /** The bound. */
  limit: z.number(),
})
/** A performance goal. */
export type BenchGoal = z.infer<typeof BenchGoal>

/** One measured figure. */
export const BenchResult = z.object({
  /** `reference`, `latency`, `pipelining`, `parallel`, `streaming`, `memory`, `startup`, or a package's own. */
  group: z.string(),
  /** What was measured, e.g. `shell.run('true')`; stable across runs. */
  name: z.string(),
  /** Unit of `value` and the percentiles: `ms`, `cmds/s`, `MB/s`, `MB`, `KB` or `x`. */
  unit: z.string(),
  /** The headline number (the p50 for latencies), the median across rounds. */
  value: z.number(),
  /** Median latency, the median across rounds. */
  p50: z.number().optional(),
  /** 90th percentile latency, the median across rounds. */
  p90: z.number().optional(),
  /** 99th percentile latency, the median across rounds. */
  p99: z.number().optional(),
  /** `value` divided by the matching reference figure measured in the same run. */
  ratioToBaseline: z.number().optional(),
  /** The name of the figure `ratioToBaseline` divides by. */
  reference: z.string().optional(),
  /** The project's goal for this figure, when it has one. */
  goal: BenchGoal.optional(),
})
/** One figure. */
export type BenchResult = z.infer<typeof BenchResult>

/** A whole results file. */
export const BenchReport = z.object({
  /** When the run happened (ISO 8601). */
  generatedAt: z.string().optional(),
  /** Facts about the machine: CPU, cores, memory, OS, Node version. */
  machine: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
  /** How the figures were measured, in words. */
  method: z.string(),
  /** The figures. */
  results: z.array(BenchResult),
})
/** A results file. */
export type BenchReport = z.infer<typeof BenchReport>
