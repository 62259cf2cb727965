// The benchmark's output: the JSON document the docs site renders (shape documented in
// bench/README.md at the repository root; the protocol's BenchReport schema) and the table
// printed to stdout.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, platform, release, totalmem } from 'node:os'
import { dirname } from 'node:path'
import { type BenchReport, BenchResult } from '@conch/protocol'

/** The report this harness writes: the protocol's file shape with the machine facts it records. */
export interface FullBenchReport extends BenchReport {
  /** When the run happened. */
  generatedAt: string
  /** Facts about the machine the numbers come from. */
  machine: { cpus: number; cpuModel: string; memoryBytes: number; node: string; os: string }
}

/** Facts about the machine the numbers come from. */
export function machineInfo(): FullBenchReport['machine'] {
  const list = cpus()
  return {
    cpus: list.length,
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    memoryBytes: totalmem(),
    node: process.version,
    os: `${platform()} ${release()}`,
  }
}

/** Reads the results another benchmark wrote in the same shape; [] when the file is absent or foreign. */
export function readForeignResults(path: string): BenchResult[] {
  if (!existsSync(path)) return []
  try {
    const doc = JSON.parse(readFileSync(path, 'utf8')) as unknown
    const list = Array.isArray(doc) ? doc : (doc as { results?: unknown }).results
    if (!Array.isArray(list)) return []
    return list.flatMap((r) => {
      const parsed = BenchResult.safeParse(r)
      return parsed.success ? [parsed.data] : []
    })
  } catch {
    return []
  }
}

/** Writes the report as pretty JSON. */
export function writeReport(path: string, report: FullBenchReport): void {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`)
}

function formatNumber(n: number | undefined): string {
  if (n === undefined || Number.isNaN(n)) return ''
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en-US')
  if (Math.abs(n) >= 100) return n.toFixed(0)
  if (Math.abs(n) >= 10) return n.toFixed(1)
  if (Math.abs(n) >= 1) return n.toFixed(2)
  return n.toFixed(3)
}

/** The report as an aligned text table. */
export function formatTable(results: readonly BenchResult[]): string {
  const header = ['group', 'figure', 'value', 'unit', 'p50', 'p90', 'p99', 'vs ref']
  const rows = results.map((r) => [
    r.group,
    r.name,
    formatNumber(r.value),
    r.unit,
    formatNumber(r.p50),
    formatNumber(r.p90),
    formatNumber(r.p99),
    r.ratioToBaseline === undefined ? '' : `${formatNumber(r.ratioToBaseline)}x`,
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i >= 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ')
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n')
}
