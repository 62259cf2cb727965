// Where a cold sandbox create spends its time, step by step, per driver: the driver's create
// (workspace, disk, cgroups), the agent's start (spawn, bwrap), the agent's boot until its
// hello, and the first exec. The boot is split by the start times the agent logs when it
// listens: from the start's release to the agent's process (`toNode`: the chain's execs, bwrap's
// namespaces and mounts), Node's bootstrap, the bundle's load until the agent's code runs, the
// agent's set-up until it listens, and the handshake until its hello reaches the runner. Next to
// them, in the same rounds: a bare Node start, and the agent bundle's load with and without V8's
// compile cache (what the drivers now give it). Medians of `BENCH_SANDBOXES` rounds; rounds
// alternate so all see the same load. Part of `pnpm bench`.
//
//   pnpm exec node --conditions=source packages/runner/bench/create-steps-bench.ts
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { AGENT_NODE_FLAGS, compileCacheFlag, DEFAULT_SANDBOX_LIMITS } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import pino from 'pino'
import { AgentLink } from '../src/agent-link.ts'
import { locateAgentBundle } from '../src/drivers/agent-bundle.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import type { SandboxDriver } from '../src/drivers/sandbox-driver.ts'

const ROUNDS = Number(process.env.BENCH_SANDBOXES ?? 6)
const STEPS = ['create', 'startAgent', 'hello', 'firstExec', 'total'] as const

/** Wall-clock now in ms, comparable with the agent's logged start times. */
const wallNow = (): number => performance.timeOrigin + performance.now()

/** The hello step split by the agent's logged start times; null when its log has none. */
function helloSplit(dir: string | undefined, released: number, hello: number): Record<string, number> | null {
  const log = dir === undefined ? '' : join(dir, 'agent.log')
  if (log === '' || !existsSync(log)) return null
  const line = readFileSync(log, 'utf8')
    .split('\n')
    .find((l) => l.includes('"agent listening"'))
  const start = line ? (JSON.parse(line) as { start?: Record<string, number> }).start : undefined
  if (!start) return null
  const origin = start.processStart!
  return {
    toNode: origin - released,
    nodeBoot: start.bootstrapped!,
    bundleLoad: start.main! - start.bootstrapped!,
    agentSetUp: start.listening! - start.main!,
    handshake: hello - (origin + start.listening!),
  }
}

function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return Math.round(sorted[Math.floor((sorted.length - 1) / 2)]! * 10) / 10
}

/** Wall time of a process that exits (the bundle stops at its usage check). */
function timed(args: string[]): number {
  const t0 = performance.now()
  spawnSync(process.execPath, args, { stdio: 'ignore' })
  return performance.now() - t0
}

const stateDir = mkdtempSync(join(tmpdir(), 'conch-bench-steps-'))
const drivers: [string, SandboxDriver, object][] = [
  ['local', new LocalDriver({ stateDir }), {}],
  ['namespace', new NamespaceDriver({ stateDir }), DEFAULT_SANDBOX_LIMITS],
]
const bundle = await locateAgentBundle()
const cacheDir = join(stateDir, 'bench-compile-cache')
timed([...AGENT_NODE_FLAGS, compileCacheFlag(cacheDir), bundle])
const samples: Record<string, number[]> = { bareNode: [], bundleNoCache: [], bundleCached: [] }
// Drivers wait on unref'd timers (a sandbox's exit status); the bench has no server to hold the loop.
const keepAlive = setInterval(() => {}, 1_000)
try {
  for (let round = 0; round < ROUNDS + 1; round++) {
    const keep = round > 0 // the first round warms the runtime image and the caches
    const bare = timed(['-e', '0'])
    const noCache = timed([...AGENT_NODE_FLAGS, bundle])
    const cached = timed([...AGENT_NODE_FLAGS, compileCacheFlag(cacheDir), bundle])
    if (keep) {
      samples.bareNode!.push(bare)
      samples.bundleNoCache!.push(noCache)
      samples.bundleCached!.push(cached)
    }
    for (const [name, driver, limits] of drivers) {
      const spec = {
        id: `sb_steps${name.slice(0, 2)}${round}${Math.random().toString(36).slice(2, 8)}`,
        env: {},
        limits,
        scrollbackBytes: 1 << 20,
        maxSessions: 64,
        linkSecret: mintLinkSecret(),
      }
      const t = [performance.now()]
      const created = await driver.create(spec)
      t.push(performance.now())
      const started = await driver.startAgent(created, spec)
      t.push(performance.now())
      const released = wallNow()
      const link = await AgentLink.open(await driver.connect(started, 15_000), {
        secret: spec.linkSecret,
        logger: pino({ level: 'silent' }),
      })
      t.push(performance.now())
      const split = helloSplit((started.state as { dir?: string }).dir, released, wallNow())
      await link.call('exec', { command: 'true', timeoutMs: 10_000 })
      t.push(performance.now())
      link.close()
      await driver.destroy(started)
      if (!keep) continue
      STEPS.forEach((step, i) => {
        const key = `${name}.${step}`
        samples[key] ??= []
        samples[key]!.push(step === 'total' ? t[4]! - t[0]! : t[i + 1]! - t[i]!)
      })
      for (const [part, ms] of Object.entries(split ?? {})) {
        samples[`${name}.hello.${part}`] ??= []
        samples[`${name}.hello.${part}`]!.push(ms)
      }
    }
  }
  const result = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]))
  const saved = median(samples.bundleNoCache!) - median(samples.bundleCached!)
  process.stdout.write(
    `${JSON.stringify(
      {
        rounds: ROUNDS,
        medianMs: result,
        compileCacheSavesMs: Math.round(saved * 10) / 10,
        bundleCachedVsNoCache:
          Math.round((median(samples.bundleCached!) / median(samples.bundleNoCache!)) * 100) / 100,
        bundleCachedVsBareNode:
          Math.round((median(samples.bundleCached!) / median(samples.bareNode!)) * 100) / 100,
      },
      null,
      2,
    )}\n`,
  )
} finally {
  clearInterval(keepAlive)
  rmSync(stateDir, { recursive: true, force: true })
}
