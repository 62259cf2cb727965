// What the router adds to a call: the same sandbox driven directly at its runner and through a
// router, interleaved in rounds so machine noise hits both alike. Prints p50 and p99 of a shell
// run (WebSocket relay) and of a REST exec (HTTP forward), and the ratio router / direct.
//   node --conditions=source packages/router/bench/router-overhead.ts [iterations]
import { Sandbox } from '@conch/sdk'
import { startCluster } from '../test/runner-cluster.ts'

const iterations = Number(process.argv[2] ?? 200)
const ROUNDS = 10

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

async function time(fn: () => Promise<unknown>, n: number, into: number[]): Promise<void> {
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await fn()
    into.push(performance.now() - t0)
  }
}

await using cluster = await startCluster(1)
const direct = await Sandbox.create({ url: cluster.runners[0]!.current.url, apiKey: cluster.apiKey })
const routed = await Sandbox.connect(direct.id, { url: cluster.router.url, apiKey: cluster.apiKey })
const directShell = await direct.shell()
const routedShell = await routed.reattachShell(directShell.sessionId)
const samples = {
  shellDirect: [] as number[],
  shellRouted: [] as number[],
  execDirect: [] as number[],
  execRouted: [] as number[],
}
const perRound = Math.ceil(iterations / ROUNDS)
for (let round = 0; round < ROUNDS; round++) {
  await time(() => directShell.run('true'), perRound, samples.shellDirect)
  await time(() => routedShell.run('true'), perRound, samples.shellRouted)
  await time(() => direct.exec('true'), perRound, samples.execDirect)
  await time(() => routed.exec('true'), perRound, samples.execRouted)
}
const row = (name: string, d: number[], r: number[]): string =>
  `${name.padEnd(12)} direct p50 ${percentile(d, 50).toFixed(2)} ms p99 ${percentile(d, 99).toFixed(2)} ms | router p50 ${percentile(r, 50).toFixed(2)} ms p99 ${percentile(r, 99).toFixed(2)} ms | ratio p50 ${(percentile(r, 50) / percentile(d, 50)).toFixed(2)}`
console.log(`${samples.shellDirect.length} calls each`)
console.log(row('shell.run', samples.shellDirect, samples.shellRouted))
console.log(row('exec', samples.execDirect, samples.execRouted))
directShell.close()
routedShell.close()
await direct.destroy()
