// Agent-level benchmark: latency and throughput of shell runs through the agent's Unix socket.
// Starts the real agent (`src/main.ts`, or AGENT_BENCH_CHECKOUT's) as a child process, drives it
// with a minimal runner-side client, prints a table and writes `bench/results/agent.json` at the
// repository root.
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import type { BenchReport, BenchResult } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { AgentClient } from '../test/agent-client.ts'

const here = dirname(fileURLToPath(import.meta.url))
const repoRoot = join(here, '..', '..', '..')
const quick = process.env.BENCH_QUICK === '1'
const runs = Number(process.env.BENCH_SEQUENTIAL_RUNS ?? (quick ? 300 : 2000))
const warmup = Number(process.env.BENCH_WARMUP_RUNS ?? (quick ? 20 : 100))
const pipelined = Number(process.env.BENCH_PIPELINED_MAX ?? 2000)
const streamBytes = Number(process.env.BENCH_AGENT_STREAM_BYTES ?? (quick ? 64 << 20 : 1 << 30))

const dir = mkdtempSync(join(tmpdir(), 'conch-agent-bench-'))
const root = join(dir, 'root')
mkdirSync(root)
const socketPath = join(dir, 'agent.sock')
const agent = spawn(
  process.execPath,
  [
    ...(process.env.BENCH_AGENT_PROF
      ? ['--cpu-prof', '--cpu-prof-interval=50', `--cpu-prof-dir=${process.env.BENCH_AGENT_PROF}`]
      : []),
    // AGENT_BENCH_NODE_FLAGS: node flags for the agent, e.g. the drivers' (`AGENT_NODE_FLAGS`).
    ...(process.env.AGENT_BENCH_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== ''),
    '--conditions=source',
    // AGENT_BENCH_ENTRY runs that entry file (e.g. the built bundle, `dist/conch-agent.mjs`, which
    // drivers start); AGENT_BENCH_CHECKOUT another checkout's agent (its root, dependencies
    // installed), for A/B.
    process.env.AGENT_BENCH_ENTRY
      ? process.env.AGENT_BENCH_ENTRY
      : process.env.AGENT_BENCH_CHECKOUT
        ? join(process.env.AGENT_BENCH_CHECKOUT, 'packages', 'agent', 'src', 'main.ts')
        : join(here, '..', 'src', 'main.ts'),
    '--socket',
    socketPath,
    '--secretFd',
    '3',
    '--root',
    root,
  ],
  {
    // BENCH_AGENT_STDOUT=1 shows the agent's stdout (where `--trace-gc` prints).
    stdio: ['ignore', process.env.BENCH_AGENT_STDOUT ? 'inherit' : 'ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root },
  },
)
const secret = mintLinkSecret()
const secretPipe = agent.stdio[3]
if (secretPipe instanceof Writable) secretPipe.end(secret)
await new Promise<void>((resolve, reject) => {
  agent.stderr?.on('data', (d: Buffer) => {
    if (d.toString().includes('agent listening')) resolve()
  })
  agent.once('exit', (code) => reject(new Error(`agent exited with ${code}`)))
})

const client = await AgentClient.connect(socketPath, secret)
client.onFrame = () => false
let id = 0
const run = (command: string) =>
  client.call('session.run', { sessionId: 'default', id: `b${++id}`, command, buffer: true })

/** User and system CPU time of a process so far, in ms (0 where /proc is not readable). */
function processCpu(pid: number | undefined): { user: number; system: number } {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]!.split(' ')
    const tick = 1000 / 100
    return { user: Number(fields[11]) * tick, system: Number(fields[12]) * tick }
  } catch {
    return { user: 0, system: 0 }
  }
}

/** The agent's CPU time per run of the channel loop, in µs. */
let cpuPerRun = { user: 0, system: 0 }

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

/**
 * The reference of the same run: bash on three pipes, driven line by line (`true; echo`), each
 * run ending at its newline, with no framing, markers, files, link or agent in between.
 */
function bashOverPipes() {
  const bash = spawn('bash', ['--noprofile', '--norc'], { stdio: ['pipe', 'pipe', 'ignore'] })
  let want = 0
  let got = 0
  let waiter: (() => void) | null = null
  bash.stdout.on('data', (d: Buffer) => {
    for (let i = d.indexOf(10); i >= 0; i = d.indexOf(10, i + 1)) got++
    if (got >= want) waiter?.()
  })
  return {
    /** Runs `true` `n` times, written at once, and resolves when every one has answered. */
    run(n: number): Promise<void> {
      want += n
      bash.stdin.write('true; echo\n'.repeat(n))
      return new Promise((resolve) => {
        waiter = resolve
        if (got >= want) resolve()
      })
    },
    close: () => bash.kill(),
  }
}

/** Times `runs` awaited calls of `fn` after `warmup` untimed ones; the samples sorted, in ms. */
async function timed(fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn()
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    await fn()
    times.push(performance.now() - t)
  }
  return times.sort((a, b) => a - b)
}

/** A latency figure from sorted samples: p50 as its value. */
function latency(name: string, sorted: number[]): BenchResult {
  const p50 = percentile(sorted, 50)
  return {
    group: 'agent',
    name,
    unit: 'ms',
    value: p50,
    p50,
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
  }
}

const results: BenchResult[] = []
const reference = bashOverPipes()
{
  results.push(latency("reference: bash over pipes run('true')", await timed(() => reference.run(1))))
  const t = performance.now()
  await reference.run(pipelined)
  results.push({
    group: 'agent',
    name: `reference: bash over pipes ${pipelined} pipelined`,
    unit: 'cmds/s',
    value: pipelined / ((performance.now() - t) / 1000),
  })
}
reference.close()

for (const command of ['true', 'echo hi']) {
  results.push(latency(`agent socket run('${command}')`, await timed(() => run(command))))
}

{
  // The runner's path: an unbuffered run whose end arrives as `shell_exit` on an attached channel.
  const ch = 2
  let ended: ((id: string) => void) | null = null
  client.onFrame = (f) => {
    if (f.type === 'shell_exit' && f.ch === ch) ended?.(f.id)
    else if ((f.type === 'shell_out' || f.type === 'shell_err') && f.ch === ch)
      client.send({ type: 'credit', ch, bytes: f.payload.byteLength })
    return false
  }
  await client.call('session.attach', { sessionId: 'default', ch })
  const channelRun = (command: string) => {
    const runId = `c${++id}`
    const exited = new Promise<void>((resolve) => {
      ended = (endedId) => {
        if (endedId === runId) resolve()
      }
    })
    void client.call('session.run', { sessionId: 'default', id: runId, command, buffer: false })
    return exited
  }
  for (let i = 0; i < warmup; i++) await channelRun('true')
  const times: number[] = []
  const before = processCpu(agent.pid)
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    await channelRun('true')
    times.push(performance.now() - t)
  }
  const after = processCpu(agent.pid)
  cpuPerRun = {
    user: ((after.user - before.user) * 1000) / runs,
    system: ((after.system - before.system) * 1000) / runs,
  }
  results.push(
    latency(
      "agent socket run('true') to shell_exit",
      times.sort((a, b) => a - b),
    ),
  )
  client.send({ type: 'close', ch })
  client.onFrame = () => false
}

{
  const t = performance.now()
  await Promise.all(Array.from({ length: pipelined }, () => run('true')))
  const seconds = (performance.now() - t) / 1000
  results.push({
    group: 'agent',
    name: `agent socket ${pipelined} pipelined runs`,
    unit: 'cmds/s',
    value: pipelined / seconds,
  })
}

{
  // Stream large output on an attached channel, granting credit as the bytes arrive.
  const ch = 1
  let received = 0
  let done: () => void = () => {}
  const finished = new Promise<void>((resolve) => {
    done = resolve
  })
  client.onFrame = (f) => {
    if (f.type === 'shell_out' && f.ch === ch) {
      received += f.payload.byteLength
      client.send({ type: 'credit', ch, bytes: f.payload.byteLength })
    } else if (f.type === 'shell_exit' && f.ch === ch && f.id === 'stream') {
      done()
    }
    return false
  }
  await client.call('session.attach', { sessionId: 'default', ch })
  const t = performance.now()
  const cpuBefore = processCpu(agent.pid)
  await client.call('session.run', {
    sessionId: 'default',
    id: 'stream',
    command: `head -c ${streamBytes} /dev/zero`,
    buffer: false,
  })
  await finished
  const seconds = (performance.now() - t) / 1000
  const cpuAfter = processCpu(agent.pid)
  if (received !== streamBytes) throw new Error(`streamed ${received} of ${streamBytes} bytes`)
  results.push({
    group: 'agent',
    name: 'agent socket streamed output',
    unit: 'MB/s',
    value: streamBytes / 1e6 / seconds,
  })
  const cpu = cpuAfter.user + cpuAfter.system - cpuBefore.user - cpuBefore.system
  results.push({
    group: 'agent',
    name: 'agent CPU per MiB streamed',
    unit: 'ms',
    value: cpu / (streamBytes / (1 << 20)),
  })
}

client.close()
agent.kill('SIGTERM')
await new Promise((resolve) => agent.once('exit', resolve))
rmSync(dir, { recursive: true, force: true })

const round = (n: number) => Math.round(n * 1000) / 1000
console.log(`agent benchmark (${cpus().length} CPUs, node ${process.version})`)
console.log(
  ['figure'.padEnd(44), 'unit'.padEnd(7), 'value'.padStart(12), 'p90'.padStart(10), 'p99'.padStart(10)].join(
    ' ',
  ),
)
for (const r of results) {
  console.log(
    [
      r.name.padEnd(44),
      r.unit.padEnd(7),
      String(round(r.value)).padStart(12),
      String(r.p90 === undefined ? '' : round(r.p90)).padStart(10),
      String(r.p99 === undefined ? '' : round(r.p99)).padStart(10),
    ].join(' '),
  )
}
const refRun = results.find((r) => r.name.startsWith('reference: bash over pipes run'))!.value
const refPipelined = results.find(
  (r) => r.name.startsWith('reference: bash over pipes') && r.unit === 'cmds/s',
)!.value
for (const r of results) {
  if (r.name.startsWith('reference')) continue
  if (r.unit === 'ms' && !r.name.includes('CPU'))
    console.log(`${r.name}: ${(r.value / refRun).toFixed(2)}x the reference's p50`)
  if (r.unit === 'cmds/s')
    console.log(`${r.name}: ${(r.value / refPipelined).toFixed(3)}x the reference's rate`)
}
console.log(
  `agent process CPU per run('true') to shell_exit: ${cpuPerRun.user.toFixed(0)} µs user + ${cpuPerRun.system.toFixed(0)} µs system`,
)
const out = join(repoRoot, 'bench', 'results', 'agent.json')
mkdirSync(dirname(out), { recursive: true })
const report: BenchReport = {
  generatedAt: new Date().toISOString(),
  machine: {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    os: process.platform,
  },
  method:
    'A client on the agent socket (length-prefixed frames) against a real agent and real bash; sequential runs after warm-up (buffered results, and unbuffered runs ended by shell_exit on an attached channel as the runner does), pipelined runs sent at once, and one streamed run of zeros. Reference of the same run: bash on pipes driven by `true; echo` lines.',
  results,
}
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`)
console.log(`wrote ${out}`)
