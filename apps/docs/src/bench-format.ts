// Benchmark figures for humans: durations, sizes, rates and ratios written the way a reader
// says them ("0.32 ms", "1.2 s", "174 MB", "1.05 GB/s", "4,729 commands/s", "12.8×").

/** A number to 3 significant digits, with thousands separators and no exponent. */
export function formatNumber(n: number): string {
  if (n === 0) return '0'
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString('en-US')
  return Number(n.toPrecision(3)).toLocaleString('en-US', { maximumFractionDigits: 20 })
}

const SIZE_UNITS = ['B', 'KB', 'MB', 'GB', 'TB'] as const
const SIZE_STEP = 1000

/** A byte count in decimal units, the units the benchmark reports in: `1073741824` gives `1.07 GB`. */
export function formatBytes(bytes: number): string {
  let value = bytes
  let unit = 0
  while (Math.abs(value) >= SIZE_STEP && unit < SIZE_UNITS.length - 1) {
    value /= SIZE_STEP
    unit++
  }
  while (Math.abs(value) < 1 && value !== 0 && unit > 0) {
    value *= SIZE_STEP
    unit--
  }
  return `${formatNumber(value)} ${SIZE_UNITS[unit]}`
}

/** A duration in milliseconds: µs below 0.1 ms, s from 1000 ms. */
export function formatDuration(ms: number): string {
  if (ms !== 0 && Math.abs(ms) < 0.1) return `${formatNumber(ms * 1000)} µs`
  if (Math.abs(ms) >= 1000) return `${formatNumber(ms / 1000)} s`
  return `${formatNumber(ms)} ms`
}

/** Bytes in one benchmark unit. */
const BYTES_PER: Record<string, number> = { B: 1, KB: 1e3, MB: 1e6, GB: 1e9 }

/**
 * A figure in its unit, for humans. Known units: `ms`, sizes (`B`, `KB`, `MB`, `GB`), rates
 * (`MB/s`, `cmds/s`) and `x` (a ratio); anything else is the number and the unit as given.
 */
export function formatQuantity(value: number, unit: string): string {
  if (unit === 'ms') return formatDuration(value)
  if (unit === 'x') return `${formatNumber(value)}×`
  const bytes = BYTES_PER[unit]
  if (bytes !== undefined) return formatBytes(value * bytes)
  const rate = /^(\w+)\/s$/.exec(unit)?.[1]
  if (rate !== undefined) {
    const perByte = BYTES_PER[rate]
    if (perByte !== undefined) return `${formatBytes(value * perByte)}/s`
    return `${formatNumber(value)} ${rate === 'cmds' ? 'commands' : rate}/s`
  }
  return `${formatNumber(value)} ${unit}`
}

/** A ratio to the reference figure: `11.3×`. */
export function formatRatio(ratio: number): string {
  return `${formatNumber(ratio)}×`
}

/** Prose from the benchmark file with its raw byte counts written for humans: `1073741824 bytes` gives `1.07 GB`. */
export function humanizeBytesInText(text: string): string {
  return text.replace(/\b(\d{4,}) bytes\b/g, (_, n: string) => formatBytes(Number(n)))
}
