// The benchmark page reads bench/results/latest.json in the shape bench/README.md documents;
// these tests pin that reading, including what happens with a foreign or partial file.
import { expect, it } from 'vitest'
import { formatQuantity, humanizeBytesInText } from '../src/bench-format.ts'
import { goalRows, headlineLatency, latencyComparisons, parseBenchFile } from '../src/bench-results.ts'

const SAMPLE = {
  generatedAt: '2026-01-02T03:04:05.000Z',
  machine: { cpus: 2, cpuModel: 'Example CPU', memoryBytes: 8 * 2 ** 30, node: 'v24.0.0', os: 'linux' },
  method: 'Full stack, 3 rounds.',
  results: [
    { group: 'reference', name: 'bash over pipes: true', unit: 'ms', value: 0.03, p50: 0.03, p99: 0.2 },
    {
      group: 'latency',
      name: "shell.run('true')",
      unit: 'ms',
      value: 1,
      p50: 1,
      p99: 4,
      ratioToBaseline: 33,
    },
    { group: 'reference', name: 'fresh bash -c from Node: true', unit: 'ms', value: 4, p50: 4 },
    { group: 'latency', name: "sb.exec('true')", unit: 'ms', value: 6, p50: 6, ratioToBaseline: 200 },
    { group: 'memory', name: 'idle session: bash RSS', unit: 'KB', value: 3400 },
    { group: 'broken', name: 'no value', unit: 'ms' },
  ],
}

it('reads the documented shape and skips figures without a value', () => {
  const bench = parseBenchFile(SAMPLE)
  expect(bench?.method).toBe('Full stack, 3 rounds.')
  expect(bench?.generatedAt).toBe(SAMPLE.generatedAt)
  expect(bench?.machine.cpuModel).toBe('Example CPU')
  expect(bench?.results.map((r) => r.name)).not.toContain('no value')
  expect(bench?.results).toHaveLength(5)
})

it('pairs shell.run with exec, a bare spawn and bash over pipes for the same command', () => {
  const [c] = latencyComparisons(parseBenchFile(SAMPLE))
  expect(c?.command).toBe("'true'")
  expect(c?.shell.p50).toBe(1)
  expect(c?.exec?.value).toBe(6)
  expect(c?.spawn?.value).toBe(4)
  expect(c?.pipes?.value).toBe(0.03)
})

it('has no headline figure when there is no file or no method', () => {
  expect(headlineLatency(null)).toBeNull()
  expect(parseBenchFile({ results: [] })).toBeNull()
  expect(parseBenchFile('not json')).toBeNull()
})

it('writes figures for humans in their units', () => {
  expect(formatQuantity(1073741824, 'B')).toBe('1.07 GB')
  expect(formatQuantity(0.324026, 'ms')).toBe('0.324 ms')
  expect(formatQuantity(0.028648, 'ms')).toBe('28.6 µs')
  expect(formatQuantity(1257.15, 'ms')).toBe('1.26 s')
  expect(formatQuantity(174.440448, 'MB')).toBe('174 MB')
  expect(formatQuantity(3392.056, 'KB')).toBe('3.39 MB')
  expect(formatQuantity(0.328, 'KB')).toBe('328 B')
  expect(formatQuantity(1049.30318, 'MB/s')).toBe('1.05 GB/s')
  expect(formatQuantity(4728.6645, 'cmds/s')).toBe('4,729 commands/s')
  expect(formatQuantity(12.8439, 'x')).toBe('12.8×')
  expect(formatQuantity(7, 'widgets')).toBe('7 widgets')
})

it('writes the byte counts in the method line for humans', () => {
  expect(humanizeBytesInText('Streaming: 1073741824 bytes; idle memory: 1000 sessions.')).toBe(
    'Streaming: 1.07 GB; idle memory: 1000 sessions.',
  )
})

it('says for each goal whether the run met it, by ratio or by value', () => {
  const bench = parseBenchFile({
    ...SAMPLE,
    results: [
      {
        group: 'goals',
        name: "shell.run('true') vs bare two-hop",
        unit: 'ms',
        value: 0.6,
        ratioToBaseline: 1.5,
        reference: 'bare two-hop: true',
        goal: { bound: 'max', of: 'ratio', limit: 1 },
      },
      {
        group: 'goals',
        name: 'pipelined vs bare two-hop',
        unit: 'cmds/s',
        value: 9000,
        ratioToBaseline: 0.9,
        goal: { bound: 'min', of: 'ratio', limit: 0.8 },
      },
      { group: 'goals', name: 'warm', unit: 'ms', value: 12, goal: { bound: 'max', of: 'value', limit: 20 } },
      {
        group: 'goals',
        name: 'no ratio',
        unit: 'ms',
        value: 1,
        goal: { bound: 'max', of: 'ratio', limit: 1 },
      },
      { group: 'latency', name: 'no goal', unit: 'ms', value: 1 },
    ],
  })
  expect(goalRows(bench).map((g) => [g.result.name, g.measured, g.met])).toEqual([
    ["shell.run('true') vs bare two-hop", 1.5, false],
    ['pipelined vs bare two-hop', 0.9, true],
    ['warm', 12, true],
  ])
  expect(goalRows(bench)[0]?.result.reference).toBe('bare two-hop: true')
})
