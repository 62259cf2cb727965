// Reads bench/results/latest.json (written by `pnpm bench` at the repository root) at docs build
// time. The file is optional: without it, or when it does not have the expected shape, the
// benchmark page shows its method and no numbers.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

/** One measured figure (shape: bench/README.md at the repository root). */
export interface BenchResult {
  /** `reference`, `latency`, `pipelining`, `parallel`, `streaming`, `memory`, `startup`, ... */
  group: string
  /** What was measured, e.g. `shell.run('true')`; stable across runs. */
  name: string
  /** Unit of `value` and the percentiles, e.g. `ms`, `ops/s`, `MB`. */
  unit: string
  /** The headline value (the median for latencies). */
  value: number
  p50?: number
  p90?: number
  p99?: number
  /** value ÷ the matching reference figure of the same run. */
  ratioToBaseline?: number
}

/** The benchmark file. */
export interface BenchFile {
  /** Facts about the machine: CPU, cores, memory, OS, Node version. */
  machine: Record<string, string | number | boolean>
  /** How the figures were measured, in words. */
  method: string
  /** When the run happened (ISO 8601), if recorded. */
  generatedAt?: string
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
    const group = typeof r.group === 'string' ? r.group : 'results'
    const result: BenchResult = { group, name: r.name, unit: r.unit, value }
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
  const generatedAt = typeof json.generatedAt === 'string' ? json.generatedAt : undefined
  return { machine, method: json.method, results, ...(generatedAt ? { generatedAt } : {}) }
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
