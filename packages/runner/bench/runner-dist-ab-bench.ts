// A/B benchmark of two packaged runners: this checkout's dist/ against another build (a dist/
// from the commit before a build or start-up change), run side by side and interleaved round by
// round, so a loaded machine slows both alike and the ratio after/before is what to read. Per
// round and runner: the time to listen from spawn, run('true') p50 over sequential runs, 2000
// runs' throughput with 200 in flight, `head -c` streamed through shell.stream, the runner's CPU per run
// (/proc) and its RSS. Every run and byte is checked.
//
//   BENCH_BASELINE_DIST=<dir> node --conditions=source bench/runner-dist-ab-bench.ts  (from packages/runner)
//   BENCH_ROUNDS=5 BENCH_SEQUENTIAL_RUNS=300 BENCH_PIPELINED=2000 BENCH_STREAM_BYTES=67108864

import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Sandbox, type Shell } from '@conch/sdk'
import { generateApiKey } from '../src/credentials.ts'
import { listeningUrl } from './runner-listening.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const BASELINE_DIST = process.env.BENCH_BASELINE_DIST
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL_RUNS ?? 300)
const PIPELINED = Number(process.env.BENCH_PIPELINED ?? 2000)
const PIPELINE_DEPTH = Number(process.env.BENCH_DEPTH ?? 200)
const STREAM_BYTES = Number(process.env.BENCH_STREAM_BYTES ?? 64 * 1024 ** 2)
const API_KEY = generateApiKey()
const MB = 1e6

if (!BASELINE_DIST)
  throw new Error('set BENCH_BASELINE_DIST to the dist/ folder of the build to compare with')

/** A runner under test: its build, its process and one shell in one sandbox. */
interface Side {
  name: string
  bin: string
  child: ChildProcess
  dir: string
  shell: Shell
  sandbox: Sandbox
  figures: Map<string, number[]>
}

/** The runner's user+system CPU time in ms, from /proc/<pid>/stat (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

function rssMb(pid: number): number {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(text)?.[1] ?? 0) / 1024
}

/** Starts `bin` (a packaged runner's conch.js) and resolves with it and its URL once it listens. */
async function start(bin: string): Promise<{ child: ChildProcess; url: string; dir: string; ms: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'conch-dist-ab-'))
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CONCH_')))
  const t0 = performance.now()
  const child = spawn(process.execPath, [bin, 'runner', '--port', '0', '--state-dir', join(dir, 'state')], {
    env: {
      ...clean,
      CONCH_API_KEY: API_KEY,
      CONCH_DRIVER: 'local',
      CONCH_UNSAFE_LOCAL: '1',
      CONCH_LOG_LEVEL: 'warn',
      CONCH_WARM_POOL: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const url = await listeningUrl(child, `${bin}`)
  return { child, url, dir, ms: performance.now() - t0 }
}

async function stop(child: ChildProcess, dir: string): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  await exited
  rmSync(dir, { recursive: true, force: true })
}

function record(side: Side, key: string, value: number): void {
  const list = side.figures.get(key) ?? []
  list.push(value)
  side.figures.set(key, list)
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

/** One round of every figure on one side. */
async function round(side: Side): Promise<void> {
  const pid = side.child.pid!
  const latencies: number[] = []
  const cpu0 = cpuMs(pid)
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t0 = performance.now()
    const r = await side.shell.run('true')
    latencies.push(performance.now() - t0)
    if (r.exitCode !== 0) throw new Error(`${side.name}: run('true') exited ${r.exitCode}`)
  }
  record(side, "run('true') p50, ms", median(latencies))
  record(side, 'runner CPU per sequential run, us', ((cpuMs(pid) - cpu0) / SEQUENTIAL) * 1000)
  // The runner queues at most 1024 runs per session: keep PIPELINE_DEPTH in flight.
  const t1 = performance.now()
  let next = 0
  await Promise.all(
    Array.from({ length: PIPELINE_DEPTH }, async () => {
      while (next < PIPELINED) {
        const i = next++
        const r = await side.shell.run(`echo r${i}`)
        if (r.stdout !== `r${i}\n`) throw new Error(`${side.name}: pipelined run ${i} printed ${r.stdout}`)
      }
    }),
  )
  record(
    side,
    `${PIPELINED} runs, ${PIPELINE_DEPTH} in flight, runs/s`,
    PIPELINED / ((performance.now() - t1) / 1000),
  )
  let received = 0
  const t2 = performance.now()
  for await (const event of side.shell.stream(`head -c ${STREAM_BYTES} /dev/zero`, { timeoutMs: 600_000 })) {
    if (event.type === 'exit' && event.exitCode !== 0)
      throw new Error(`${side.name}: stream exited ${event.exitCode}`)
    if (event.type !== 'exit') received += event.data.length
  }
  if (received !== STREAM_BYTES)
    throw new Error(`${side.name}: streamed ${received} of ${STREAM_BYTES} bytes`)
  record(side, 'shell.stream, MB/s', STREAM_BYTES / MB / ((performance.now() - t2) / 1000))
  record(side, 'RSS after the round, MB', rssMb(pid))
}

const builds: [string, string][] = [
  ['baseline', join(BASELINE_DIST, 'conch.js')],
  ['dist', join(ROOT, 'dist', 'conch.js')],
]
const sides: Side[] = []
try {
  for (const [name, bin] of builds) {
    const { child, url, dir } = await start(bin)
    const sandbox = await Sandbox.create({ url, apiKey: API_KEY, driver: 'local' })
    const shell = await sandbox.shell()
    for (let i = 0; i < 200; i++) await shell.run('true')
    sides.push({ name, bin, child, dir, shell, sandbox, figures: new Map() })
  }
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate which side goes first, so neither always runs on the fresher machine.
    const order = r % 2 === 0 ? sides : [...sides].reverse()
    for (const side of order) {
      const s = await start(side.bin)
      record(side, 'time to listen, ms', s.ms)
      await stop(s.child, s.dir)
      await round(side)
    }
    console.log(`round ${r + 1} done`)
  }
  const [a, b] = sides as [Side, Side]
  for (const key of a.figures.keys()) {
    // The best round (least disturbed by the machine's other work) beside the median.
    const best = (xs: number[]): number => (/ms|us|MB$/.test(key) ? Math.min(...xs) : Math.max(...xs))
    const [before, after] = [a, b].map((s) => s.figures.get(key)!)
    const all = (xs: number[]): string => xs.map((x) => x.toPrecision(3)).join(', ')
    console.log(
      `${key}: median baseline ${median(before!).toPrecision(3)}, dist ${median(after!).toPrecision(3)}, ×${(median(after!) / median(before!)).toFixed(2)} | best baseline ${best(before!).toPrecision(3)}, dist ${best(after!).toPrecision(3)}, ×${(best(after!) / best(before!)).toFixed(2)} | baseline ${all(before!)} | dist ${all(after!)}`,
    )
  }
} finally {
  for (const side of sides) {
    await side.shell.close()
    await side.sandbox.destroy().catch(() => {})
    await stop(side.child, side.dir)
  }
}
