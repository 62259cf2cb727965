// Session-level benchmark of pipelined runs: N `true` runs queued at once on one BashSession
// (real bash, no link), against bash over pipes driven by a bare client with the same
// one-marker-per-command workload, in the same process and round. Also run('true') p50 for
// both. With PIPELINE_BENCH_BEFORE set to another checkout's `packages/agent/src`, that
// BashSession is measured too, interleaved with this one (A/B/A/B), for before/after ratios.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BashSession } from '../src/bash-session.ts'
import { systemClock } from '../src/clock.ts'
import { silentLogger } from '../src/logger.ts'
import { ProcessTable } from '../src/process-tree.ts'
import { buildSessionEnv } from '../src/session-env.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'

const rounds = Number(process.env.PIPELINE_BENCH_ROUNDS ?? 5)
const pipelined = Number(process.env.PIPELINE_BENCH_RUNS ?? 2000)
const sequentialRuns = Number(process.env.PIPELINE_BENCH_SEQUENTIAL ?? 300)
const beforeDir = process.env.PIPELINE_BENCH_BEFORE

/** bash over pipes with one marker line per command: the floor. */
class PipeShell {
  readonly #bash: ChildProcessWithoutNullStreams
  readonly #nonce = randomBytes(12).toString('hex')
  readonly #pending: (() => void)[] = []
  #buffer = ''

  constructor() {
    this.#bash = spawn('bash', ['--noprofile', '--norc'], { stdio: ['pipe', 'pipe', 'pipe'] })
    this.#bash.stdout.on('data', (chunk: Buffer) => {
      this.#buffer += chunk.toString('latin1')
      const tag = `\u0001${this.#nonce} `
      for (let at = this.#buffer.indexOf(tag); at !== -1; at = this.#buffer.indexOf(tag)) {
        const end = this.#buffer.indexOf('\n', at)
        if (end === -1) break
        this.#buffer = this.#buffer.slice(end + 1)
        this.#pending.shift()?.()
      }
    })
    this.#bash.stderr.resume()
  }

  run(command: string): Promise<void> {
    return new Promise((resolve) => {
      this.#pending.push(resolve)
      this.#bash.stdin.write(`${command} </dev/null\nprintf '\\001%s %d\\n' ${this.#nonce} $?\n`)
    })
  }

  close(): void {
    this.#bash.kill('SIGKILL')
  }
}

type SessionClass = typeof BashSession
const processTable = new ProcessTable(systemClock)
const workdir = mkdtempSync(join(tmpdir(), 'conch-pipeline-bench-'))

async function newSession(Session: SessionClass): Promise<BashSession> {
  const s = new Session({
    id: 'bench',
    env: buildSessionEnv({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: workdir }, false),
    cwd: workdir,
    commandTimeoutMs: 60_000,
    spawn: nodeSpawn,
    clock: systemClock,
    logger: silentLogger,
    processTable,
    tempRoot: chooseTempRoot(),
  })
  await s.ready
  return s
}

let ids = 0
const runOn = (s: BashSession) => () => s.run({ runId: `b${++ids}`, command: 'true' })

async function rate(run: () => Promise<unknown>): Promise<number> {
  const t = performance.now()
  await Promise.all(Array.from({ length: pipelined }, run))
  return pipelined / ((performance.now() - t) / 1000)
}

async function p50(run: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 20; i++) await run()
  const times: number[] = []
  for (let i = 0; i < sequentialRuns; i++) {
    const t = performance.now()
    await run()
    times.push(performance.now() - t)
  }
  times.sort((a, b) => a - b)
  return times[Math.floor(times.length / 2)]!
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const variants: { name: string; Session: SessionClass }[] = [{ name: 'after', Session: BashSession }]
if (beforeDir !== undefined) {
  const mod = (await import(join(beforeDir, 'bash-session.ts'))) as { BashSession: SessionClass }
  variants.unshift({ name: 'before', Session: mod.BashSession })
}

const pipe = new PipeShell()
const sessions = await Promise.all(variants.map((v) => newSession(v.Session)))
const results = new Map<string, { rate: number[]; p50: number[]; rateRatio: number[]; p50Ratio: number[] }>()
for (const v of variants) results.set(v.name, { rate: [], p50: [], rateRatio: [], p50Ratio: [] })
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? variants.map((_, i) => i) : variants.map((_, i) => variants.length - 1 - i)
  for (const i of order) {
    const r = results.get(variants[i]!.name)!
    const refRate = await rate(() => pipe.run('true'))
    const runRate = await rate(runOn(sessions[i]!))
    r.rate.push(runRate)
    r.rateRatio.push(runRate / refRate)
    const refP50 = await p50(() => pipe.run('true'))
    const runP50 = await p50(runOn(sessions[i]!))
    r.p50.push(runP50)
    r.p50Ratio.push(runP50 / refP50)
  }
}
for (const v of variants) {
  const r = results.get(v.name)!
  console.log(
    `${v.name}: ${pipelined} pipelined ${median(r.rate).toFixed(0)} runs/s = ${median(r.rateRatio).toFixed(3)}x bash over pipes; run('true') p50 ${median(r.p50).toFixed(3)} ms = ${median(r.p50Ratio).toFixed(2)}x bash over pipes (medians of ${rounds} rounds)`,
  )
}
await Promise.all(sessions.map((s) => s.dispose()))
pipe.close()
rmSync(workdir, { recursive: true, force: true })
