// Runner benchmark: latency and throughput through WebSocket → runner → agent → bash, and the
// cost of each hop, measured against the agent's socket directly.
//
//   pnpm --filter @conch/runner bench      (writes bench/results/runner.json at the repo root)
//
// The runner runs as its own process (the real CLI), so the client and the runner do not share
// an event loop. The direct-agent figures come from a second agent started the way the local
// driver starts it, driven with the runner's own AgentLink.

import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BEARER_SUBPROTOCOL_PREFIX, SHELL_SUBPROTOCOL } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import pino from 'pino'
import { WebSocket } from 'ws'
import { AgentLink } from '../src/agent-link.ts'
import { generateApiKey } from '../src/credentials.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import type { DriverSandbox } from '../src/drivers/sandbox-driver.ts'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = join(HERE, '..', '..', '..')
const RUNS = Number(process.env.BENCH_RUNS ?? 2000)
const WARMUP = 100
const ROUNDS = 5
const SLOW_BYTES = Number(process.env.BENCH_SLOW_BYTES ?? 1024 * 1024 * 1024)
const STREAM_BYTES = Number(process.env.BENCH_STREAM_BYTES ?? 256 * 1024 * 1024)

function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

interface Latency {
  p50: number
  p90: number
  p99: number
  n: number
}

function latency(samples: number[]): Latency {
  const r = (x: number) => Math.round(x * 1000) / 1000
  return {
    p50: r(percentile(samples, 50)),
    p90: r(percentile(samples, 90)),
    p99: r(percentile(samples, 99)),
    n: samples.length,
  }
}

async function startRunner(stateDir: string, apiKey: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=source',
      ...(process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []),
      join(HERE, '..', 'src', 'main.ts'),
      'runner',
      '--port',
      '0',
      '--state-dir',
      stateDir,
      '--log-level',
      'error',
      '--max-queued-runs-per-sandbox',
      String(RUNS * 2),
    ],
    { env: { ...process.env, CONCH_API_KEY: apiKey }, stdio: ['ignore', 'pipe', 'inherit'] },
  )
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout?.on('data', (d) => {
      out += d
      const m = /listening on (http:\/\/[\d.:]+)/.exec(out)
      if (m) resolve(m[1]!)
    })
    child.once('exit', (code) => reject(new Error(`runner exited with ${code}`)))
  })
  return { url, child }
}

/** A shell WebSocket with a minimal run API (no per-frame validation: this is the client side). */
class BenchShell {
  readonly ws: WebSocket
  #onExit = new Map<string, () => void>()
  bytes = 0
  #onBytes: (() => void) | null = null
  readonly ready: Promise<void>

  /** Calls `fn` after every output frame. */
  onBytes(fn: () => void): void {
    this.#onBytes = fn
  }

  constructor(url: string, key: string) {
    this.ws = new WebSocket(url, [SHELL_SUBPROTOCOL, `${BEARER_SUBPROTOCOL_PREFIX}${key}`], {
      perMessageDeflate: false,
    })
    this.ready = new Promise((resolve, reject) => {
      this.ws.on('message', (data) => {
        const f = JSON.parse(String(data)) as { type: string; id?: string; data?: string }
        if (f.type === 'scrollback_end') resolve()
        else if (f.type === 'shell_exit') {
          const done = this.#onExit.get(f.id!)
          this.#onExit.delete(f.id!)
          done?.()
        } else if (f.type === 'shell_out') {
          this.bytes += f.data!.length
          this.#onBytes?.()
        } else if (f.type === 'error') {
          if (f.id && this.#onExit.has(f.id)) throw new Error(`run ${f.id} failed: ${String(data)}`)
          reject(new Error(String(data)))
        }
      })
      this.ws.once('error', reject)
    })
  }

  run(id: string, command: string): Promise<void> {
    return new Promise((resolve) => {
      this.#onExit.set(id, resolve)
      this.ws.send(JSON.stringify({ type: 'shell_run', id, command }))
    })
  }

  close(): void {
    this.ws.close()
  }
}

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
}

function step(what: string): void {
  process.stderr.write(`bench: ${what}\n`)
}

async function sequential(run: (i: number) => Promise<unknown>, n: number): Promise<number[]> {
  for (let i = 0; i < WARMUP; i++) await run(-i - 1)
  const samples: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await run(i)
    samples.push(performance.now() - t0)
  }
  return samples
}

async function main(): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), 'conch-bench-'))
  const apiKey = generateApiKey()
  const { url, child } = await startRunner(stateDir, apiKey)
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  let directAgent: DriverSandbox | null = null
  let directDir: string | null = null
  const localDriver = (dir: string) => new LocalDriver({ stateDir: dir })
  try {
    const created = await fetch(`${url}/v1/sandboxes`, { method: 'POST', headers, body: '{}' })
    const sandbox = (await created.json()) as { id: string }
    const wsUrl = `${url.replace('http', 'ws')}/v1/sandboxes/${sandbox.id}/shell`

    const t0 = performance.now()
    const sandboxStartMs = await (async () => {
      const s = performance.now()
      const r = await fetch(`${url}/v1/sandboxes`, { method: 'POST', headers, body: '{}' })
      const sb = (await r.json()) as { id: string }
      const ms = performance.now() - s
      await fetch(`${url}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers })
      return ms
    })()
    void t0

    // 1. Latency, interleaved in rounds so the machine's load hits both paths alike:
    //    WebSocket → runner → agent → bash, and the agent's socket directly (the runner's own
    //    AgentLink, no runner process, no WebSocket) on a second agent started the same way.
    step('latency rounds')
    const shell = new BenchShell(wsUrl, apiKey)
    await shell.ready
    directDir = mkdtempSync(join(tmpdir(), 'conch-bench-agent-'))
    const driver = new LocalDriver({ stateDir: directDir })
    const spec = {
      id: 'sb_benchdirect00',
      env: {},
      limits: {},
      scrollbackBytes: 8 * 1024 * 1024,
      maxSessions: 64,
      linkSecret: mintLinkSecret(),
    }
    directAgent = await driver.startAgent(await driver.create(spec), spec)
    const link = await AgentLink.open(await driver.connect(directAgent, 15_000), {
      secret: spec.linkSecret,
      logger: pino({ level: 'silent' }),
    })
    const ch = link.openChannel()
    const exits = new Map<string, () => void>()
    ch.consume((e) => {
      if (e.type === 'shell_out') ch.release(e.payload.byteLength)
      else if (e.type === 'shell_exit') {
        exits.get(e.id)?.()
        exits.delete(e.id)
      }
    })
    await link.call('session.attach', { sessionId: 'default', ch: ch.id })
    const agentRun = (id: string, command: string) =>
      new Promise<void>((resolve) => {
        exits.set(id, resolve)
        void link.call('session.run', { sessionId: 'default', id, command, buffer: false })
      })
    const samples = {
      wsTrue: [] as number[],
      wsEcho: [] as number[],
      agentTrue: [] as number[],
      agentEcho: [] as number[],
    }
    const hops: number[] = []
    const perRound = Math.ceil(RUNS / ROUNDS)
    for (let round = 0; round < ROUNDS; round++) {
      const w = await sequential((i) => shell.run(`t${round}_${i}`, 'true'), perRound)
      const a = await sequential((i) => agentRun(`t${round}_${i}`, 'true'), perRound)
      samples.wsTrue.push(...w)
      samples.agentTrue.push(...a)
      hops.push(percentile(w, 50) - percentile(a, 50))
      samples.wsEcho.push(...(await sequential((i) => shell.run(`e${round}_${i}`, 'echo hi'), perRound)))
      samples.agentEcho.push(...(await sequential((i) => agentRun(`e${round}_${i}`, 'echo hi'), perRound)))
    }
    link.close()
    const wsTrue = latency(samples.wsTrue)
    const wsEcho = latency(samples.wsEcho)
    const agentTrue = latency(samples.agentTrue)
    const agentEcho = latency(samples.agentEcho)

    step('pipelined')
    const pipelineStart = performance.now()
    await Promise.all(Array.from({ length: RUNS }, (_, i) => shell.run(`p${i}`, 'true')))
    const pipelinedPerSec = Math.round(RUNS / ((performance.now() - pipelineStart) / 1000))

    step('streaming')
    const before = shell.bytes
    const streamStart = performance.now()
    await shell.run('stream', `head -c ${STREAM_BYTES} /dev/zero | tr '\\0' a`)
    const streamSecs = (performance.now() - streamStart) / 1000
    const streamMBps = Math.round(((shell.bytes - before) / 1024 / 1024 / streamSecs) * 10) / 10
    shell.close()

    step('slow client')
    // A client that reads slowly (pauses its socket 100 ms after every 8 MiB) while the shell
    // writes SLOW_BYTES: the runner's resident memory must stay flat.
    const slow = new BenchShell(wsUrl, apiKey)
    await slow.ready
    const rssBefore = rssOf(child.pid!)
    let rssPeak = rssBefore
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, rssOf(child.pid!))
    }, 50)
    let nextPause = 8 * 1024 * 1024
    slow.onBytes(() => {
      if (slow.bytes < nextPause) return
      nextPause += 8 * 1024 * 1024
      slow.ws.pause()
      setTimeout(() => slow.ws.resume(), 100)
    })
    const slowStart = performance.now()
    await slow.run('slow', `head -c ${SLOW_BYTES} /dev/zero | tr '\\0' a`)
    const slowSecs = (performance.now() - slowStart) / 1000
    clearInterval(sampler)
    slow.close()
    const slowClient = {
      bytes: slow.bytes,
      seconds: Math.round(slowSecs * 10) / 10,
      runnerRssBeforeMiB: Math.round(rssBefore / 1048576),
      runnerRssPeakMiB: Math.round(rssPeak / 1048576),
    }

    step('rest')
    // 2. REST exec (a fresh bash -c per call) and a buffered REST session run.
    const execBody = JSON.stringify({ command: 'true' })
    const restExec = latency(
      await sequential(
        () =>
          fetch(`${url}/v1/sandboxes/${sandbox.id}/exec`, { method: 'POST', headers, body: execBody }).then(
            (r) => r.text(),
          ),
        Math.min(RUNS, 500),
      ),
    )
    const restRun = latency(
      await sequential(
        () =>
          fetch(`${url}/v1/sandboxes/${sandbox.id}/sessions/default/run`, {
            method: 'POST',
            headers,
            body: execBody,
          }).then((r) => r.text()),
        RUNS,
      ),
    )

    const runnerHopMs = Math.round(percentile(hops, 50) * 1000) / 1000
    const result = {
      date: new Date().toISOString(),
      node: process.version,
      runs: RUNS,
      shellRun: { true: wsTrue, echo: wsEcho },
      agentDirect: { true: agentTrue, echo: agentEcho },
      restSessionRun: restRun,
      restExec,
      pipelinedCommandsPerSec: pipelinedPerSec,
      slowClient,
      streamMBps,
      sandboxStartMs: Math.round(sandboxStartMs),
      hops: {
        agentAndBashP50Ms: agentTrue.p50,
        runnerAndWebSocketP50Ms: runnerHopMs,
      },
    }
    const rows: [string, string][] = [
      [
        'shell.run true  (WS→runner→agent→bash)',
        `p50 ${wsTrue.p50} ms  p90 ${wsTrue.p90}  p99 ${wsTrue.p99}`,
      ],
      ['shell.run echo hi', `p50 ${wsEcho.p50} ms  p90 ${wsEcho.p90}  p99 ${wsEcho.p99}`],
      ['agent socket direct: true', `p50 ${agentTrue.p50} ms  p90 ${agentTrue.p90}  p99 ${agentTrue.p99}`],
      ['agent socket direct: echo hi', `p50 ${agentEcho.p50} ms  p90 ${agentEcho.p90}  p99 ${agentEcho.p99}`],
      ['runner + WebSocket hop (median of per-round p50 differences)', `${runnerHopMs} ms`],
      ['REST session run true', `p50 ${restRun.p50} ms  p90 ${restRun.p90}  p99 ${restRun.p99}`],
      ['REST exec true (fresh bash)', `p50 ${restExec.p50} ms  p90 ${restExec.p90}  p99 ${restExec.p99}`],
      ['pipelined shell runs', `${pipelinedPerSec} commands/s`],
      ['streaming through WS', `${streamMBps} MB/s`],
      [
        `slow client, ${Math.round(slowClient.bytes / 1048576)} MiB`,
        `runner RSS ${slowClient.runnerRssBeforeMiB} → peak ${slowClient.runnerRssPeakMiB} MiB in ${slowClient.seconds} s`,
      ],
      ['sandbox create → agent ready', `${Math.round(sandboxStartMs)} ms`],
    ]
    const width = Math.max(...rows.map(([k]) => k.length))
    console.log(
      `\nrunner benchmark (${RUNS} sequential runs per figure in ${ROUNDS} interleaved rounds, ${process.version}, load ${loadavg()[0]!.toFixed(1)})\n`,
    )
    for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`)
    const out = join(REPO, 'bench', 'results', 'runner.json')
    mkdirSync(dirname(out), { recursive: true })
    writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`)
    console.log(`\nwrote ${out.slice(REPO.length + 1)}`)
    await fetch(`${url}/v1/sandboxes/${sandbox.id}`, { method: 'DELETE', headers })
  } finally {
    if (directAgent && directDir) await localDriver(directDir).destroy(directAgent)
    if (directDir) rmSync(directDir, { recursive: true, force: true })
    child.kill('SIGTERM')
    await new Promise((r) => child.once('exit', r))
    rmSync(stateDir, { recursive: true, force: true })
  }
}

await main()
