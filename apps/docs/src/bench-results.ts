// Reads bench/results/latest.json (written by `pnpm bench` at the repository root) at docs build
// time. The file is optional: without it, or when it does not have the expected shape, the
// benchmark page shows its method and no numbers.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

/** One measured figure. */
export interface BenchResult {
  /** What was measured, e.g. `shell.run (conch)`. */
  name: string
  /** Unit of `value` and the percentiles, e.g. `ms`, `ops/s`, `MB`. */
  unit: string
  /** The headline value (the median for latencies). */
  value: number
  p50?: number
  p90?: number
  p99?: number
  /** value ÷ the spawn-per-command baseline's value. */
  ratioToBaseline?: number
}

/** The benchmark file. */
export interface BenchFile {
  /** Facts about the machine: CPU, cores, memory, OS, Node version. */
  machine: Record<string, string | number | boolean>
  /** How the figures were measured, in words. */
  method: string
  /** When the run happened, if recorded. */
  date?: string
  results: BenchResult[]
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const optionalNumber = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? v : undefined

/** Parses the file's JSON; null when it lacks the fields the page needs. */
export function parseBenchFile(json: unknown): BenchFile | null {
  if (!isRecord(json) || typeof json.method !== 'string' || !Array.isArray(json.results)) return null
  const results: BenchResult[] = []
  for (const r of json.results) {
    if (!isRecord(r) || typeof r.name !== 'string' || typeof r.unit !== 'string') continue
    const value = optionalNumber(r.value) ?? optionalNumber(r.p50)
    if (value === undefined) continue
    const result: BenchResult = { name: r.name, unit: r.unit, value }
    for (const key of ['p50', 'p90', 'p99', 'ratioToBaseline'] as const) {
      const n = optionalNumber(r[key])
      if (n !== undefined) result[key] = n
    }
    results.push(result)
  }
  const machine: BenchFile['machine'] = {}
  if (isRecord(json.machine)) {
    for (const [k, v] of Object.entries(json.machine)) {
      if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') machine[k] = v
    }
  }
  const date = typeof json.date === 'string' ? json.date : undefined
  return { machine, method: json.method, results, ...(date ? { date } : {}) }
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

/** The per-command latency of `shell.run`, the landing page's figure. */
export function shellRunLatency(bench: BenchFile | null): BenchResult | null {
  return bench?.results.find((r) => /shell\.run/i.test(r.name) && r.unit === 'ms') ?? null
}

/** Formats a number for a chart label: 3 significant digits, no exponent. */
export function formatValue(n: number): string {
  if (n === 0) return '0'
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString('en-US')
  return Number(n.toPrecision(3)).toString()
}
