// The SDK client's own CPU per run, A/B: this checkout's SDK against another checkout's
// (CLIENT_CPU_AB_BASE, a checkout with its dependencies installed), each on its own sandbox of
// one runner (this checkout's), beside the bare two-hop's client in the same process and the
// same rounds. The figure is this process's CPU (every thread's scheduler nanoseconds from
// /proc/self/task/*/schedstat) per run, over many interleaved rounds, as a ratio to the bare
// client's of the same round. CLIENT_CPU_AB_PIPELINED=<n> measures bursts of n pipelined runs
// instead of sequential ones. CLIENT_CPU_AB_UNDICI=1 adds a side with this SDK over Node's global
// WebSocket (undici) instead of its default on Node, the `ws` package.
//
//   CLIENT_CPU_AB_BASE=<checkout> pnpm --filter @conch/tests-e2e exec node --conditions=source bench/client-cpu-ab.ts

import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { startRunner } from '../harness/runner-process.ts'
import { BareTwoHop } from './bare-two-hop.ts'
import { median } from './stats.ts'

const BASE = process.env.CLIENT_CPU_AB_BASE
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12)
const RUNS = Number(process.env.BENCH_SEQUENTIAL_RUNS ?? 400)
const PIPELINED = Number(process.env.CLIENT_CPU_AB_PIPELINED ?? 0)

/** This process's CPU so far, in microseconds, summed over its live threads. */
function selfCpuUs(): number {
  let ns = 0
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      ns += Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0])
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return ns / 1000
}

async function load(fn: () => Promise<unknown>): Promise<void> {
  if (PIPELINED > 0) {
    await Promise.all(Array.from({ length: PIPELINED }, fn))
    return
  }
  for (let i = 0; i < RUNS; i++) await fn()
}
const PER_LOAD = PIPELINED > 0 ? PIPELINED : RUNS

interface Side {
  name: string
  run: () => Promise<unknown>
  ratios: number[]
  us: number[]
}

const runner = await startRunner({ args: ['--log-level', 'warn', '--max-queued-runs-per-sandbox', '4096'] })
const bare = await BareTwoHop.start()
const disposers: (() => Promise<void>)[] = []

async function sdkSide(name: string, root: string, undici: boolean): Promise<Side> {
  const sdk = (await import(
    pathToFileURL(join(root, 'packages/sdk/src/index.ts')).href
  )) as typeof import('@conch/sdk')
  const WebSocket = undici ? globalThis.WebSocket : undefined
  const sb = await sdk.Sandbox.create({
    url: runner.url,
    apiKey: runner.apiKey,
    env: runner.sandboxEnv,
    ...(WebSocket ? { WebSocket: WebSocket as never } : {}),
  })
  const sh = await sb.shell()
  disposers.push(async () => {
    sh.close()
    await sb.destroy()
  })
  return {
    name,
    run: async () => {
      const r = await sh.run('true')
      if (r.exitCode !== 0) throw new Error(`${name}: true exited ${r.exitCode}`)
    },
    ratios: [],
    us: [],
  }
}

const sides: Side[] = []
if (BASE) sides.push(await sdkSide('base', BASE, false))
sides.push(await sdkSide('this', join(import.meta.dirname, '../..'), false))
if (process.env.CLIENT_CPU_AB_UNDICI === '1')
  sides.push(await sdkSide('this+undici', join(import.meta.dirname, '../..'), true))
const bareUs: number[] = []

async function measure(fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 30; i++) await fn()
  const t0 = selfCpuUs()
  await load(fn)
  return (selfCpuUs() - t0) / PER_LOAD
}

for (let round = 0; round < ROUNDS; round++) {
  const order = [...sides.keys()]
  for (let i = 0; i < round % sides.length; i++) order.push(order.shift()!)
  const b1 = await measure(() => bare.run('true'))
  const got = new Map<number, number>()
  for (const i of order) got.set(i, await measure(sides[i]!.run))
  const b2 = await measure(() => bare.run('true'))
  const b = (b1 + b2) / 2
  bareUs.push(b)
  const line = [`round ${round + 1}: bare ${b.toFixed(1)} us`]
  for (const [i, us] of got) {
    sides[i]!.us.push(us)
    sides[i]!.ratios.push(us / b)
    line.push(`${sides[i]!.name} ${us.toFixed(1)} us (${(us / b).toFixed(2)}x)`)
  }
  console.log(line.join(' | '))
}
console.log(`bare client CPU per run: median ${median(bareUs).toFixed(1)} us`)
for (const side of sides)
  console.log(
    `${side.name} client CPU per run: median ${median(side.us).toFixed(1)} us = ${median(side.ratios).toFixed(2)}x bare`,
  )
for (const dispose of disposers) await dispose()
await bare[Symbol.asyncDispose]()
await runner[Symbol.asyncDispose]()
process.exit(0)
