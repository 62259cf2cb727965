// Reads bench/results/latest.json (written by `pnpm bench` at the repository root) at docs build
// time. The file is optional: without it, or when it does not have the expected shape, the
// benchmark page shows its method and no numbers.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { type BenchGoal, BenchReport, BenchResult } from '@conch/protocol'
import { z } from 'zod'

/** The benchmark file, as the protocol's `BenchReport` schema defines it. */
export type BenchFile = BenchReport

/**
 * Parses the file's JSON; null when it lacks a method or a results list. Figures that do not
 * parse are skipped one by one, so one foreign entry does not hide the rest.
 */
export function parseBenchFile(json: unknown): BenchFile | null {
  const outline = BenchReport.omit({ results: true })
    .extend({ results: z.array(z.unknown()) })
    .safeParse(json)
  if (!outline.success) return null
  const results = outline.data.results.flatMap((r) => {
    const parsed = BenchResult.safeParse(r)
    return parsed.success ? [parsed.data] : []
  })
  return { ...outline.data, results }
}

/** The repository root: the nearest folder upwards holding pnpm-workspace.yaml. */
function repoRoot(from: string): string | null {
  let dir = from
  for (;;) {
    if (existsSync(join(dir, 'pnpm-workspace.yaml'))) return dir
    const up = dirname(dir)
    if (up === dir) return null
    dir = up
  }
}

/** The latest benchmark results, or null when there are none. */
export function loadBenchResults(): BenchFile | null {
  const root = repoRoot(process.cwd())
  if (!root) return null
  const file = join(root, 'bench', 'results', 'latest.json')
  if (!existsSync(file)) return null
  return parseBenchFile(JSON.parse(readFileSync(file, 'utf8')))
}

/** One command's latency through a persistent shell, next to the ways of running it without one. */
export interface LatencyComparison {
  /** The command, as the benchmark names it: `'true'`. */
  command: string
  /** `shell.run(command)` through SDK, runner and agent. */
  shell: BenchResult
  /** `sb.exec(command)`: a fresh process per command, through the same stack. */
  exec: BenchResult | null
  /** A fresh `bash -c` spawned from Node, no conch involved. */
  spawn: BenchResult | null
  /** A bare Node client driving one bash over pipes: the floor. */
  pipes: BenchResult | null
}

/** Per command: shell.run against exec, a bare spawn and bare bash over pipes. */
export function latencyComparisons(bench: BenchFile | null): LatencyComparison[] {
  const out: LatencyComparison[] = []
  const find = (name: string): BenchResult | null =>
    bench?.results.find((r) => r.name === name && r.unit === 'ms') ?? null
  for (const r of bench?.results ?? []) {
    const match = /^shell\.run\((.+)\)$/.exec(r.name)
    if (!match?.[1] || r.unit !== 'ms') continue
    const command = match[1]
    const bare = command.replace(/^'(.*)'$/, '$1')
    out.push({
      command,
      shell: r,
      exec: find(`sb.exec(${command})`),
      spawn: find(`fresh bash -c from Node: ${bare}`),
      pipes: find(`bash over pipes: ${bare}`),
    })
  }
  return out
}

/** The landing page's figure: the first command's comparison. */
export function headlineLatency(bench: BenchFile | null): LatencyComparison | null {
  return latencyComparisons(bench)[0] ?? null
}

/** A machine fact for humans: byte counts in GiB, everything else as given. */
export function formatMachineValue(key: string, value: string | number | boolean): string {
  if (typeof value === 'number' && /bytes$/i.test(key)) return `${(value / 2 ** 30).toFixed(1)} GiB`
  return String(value)
}

/** A camelCase key as words: `cpuModel` gives `cpu model`. */
export function machineLabel(key: string): string {
  return key
    .replace(/Bytes$/, '')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toLowerCase()
}

/** Formats a number for a chart label: 3 significant digits, no exponent. */
export function formatValue(n: number): string {
  if (n === 0) return '0'
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString('en-US')
  return Number(n.toPrecision(3)).toString()
}

/** A figure the project has a goal for, and how this run stands against it. */
export interface GoalRow {
  /** The figure. */
  result: BenchResult
  /** Its goal. */
  goal: BenchGoal
  /** What the goal bounds, from this run: the ratio to the reference, or the value. */
  measured: number
  /** Whether this run met the goal. */
  met: boolean
}

/** Every figure with a goal, in file order; a ratio goal without a ratio in the file is left out. */
export function goalRows(bench: BenchFile | null): GoalRow[] {
  return (bench?.results ?? []).flatMap((result) => {
    const { goal } = result
    if (!goal) return []
    const measured = goal.of === 'ratio' ? result.ratioToBaseline : result.value
    if (measured === undefined) return []
    const met = goal.bound === 'max' ? measured <= goal.limit : measured >= goal.limit
    return [{ result, goal, measured, met }]
  })
}
