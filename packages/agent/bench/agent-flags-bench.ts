// What each Node flag buys the agent in memory and costs it in speed. Each variant starts the
// agent bundle (the file every driver runs) with `AGENT_NODE_FLAGS` plus the variant's flags,
// opens one session, and reads from /proc/<pid>/smaps_rollup: RSS, PSS, USS (private pages:
// what the process costs the host beyond the file pages it shares) and anonymous memory, idle,
// then after `BENCH_FLAG_RUNS` pipelined checked runs (and their median time per run), then
// idle again. The reference is a bare Node with the same base flags, idling, in the same round.
// Rounds interleave variants; figures are medians over rounds.
//
//   pnpm --filter @conch/runner build
//   node --conditions=source packages/agent/bench/agent-flags-bench.ts packages/runner/dist/conch-agent.mjs
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Writable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { AGENT_NODE_FLAGS } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { AgentClient } from '../test/agent-client.ts'

const bundle = process.argv[2]
if (!bundle) {
  console.error('usage: agent-flags-bench.ts <conch-agent.mjs>')
  process.exit(2)
}
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const RUNS = Number(process.env.BENCH_FLAG_RUNS ?? 5000)
const WINDOW = 32
const SETTLE_MS = 2000
/** Quiet time after the runs before the last figure. */
const AFTER_MS = 22_000

/** Variants: extra flags after `AGENT_NODE_FLAGS`. */
const VARIANTS: Record<string, string[]> = {
  AGENT_NODE_FLAGS: [],
  '+ --lite-mode': ['--lite-mode'],
  '+ --jitless': ['--jitless'],
  '+ --single-threaded': ['--single-threaded'],
  '+ --max-lazy': ['--max-lazy'],
  '+ --optimize-for-size': ['--optimize-for-size'],
  '+ --no-opt --no-maglev': ['--no-opt', '--no-maglev'],
}

interface Memory {
  rss: number
  pss: number
  uss: number
  anon: number
}

function rollup(pid: number): Memory {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
  const field = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) / 1024
  return {
    rss: field('Rss'),
    pss: field('Pss'),
    uss: field('Private_Clean') + field('Private_Dirty'),
    anon: field('Anonymous'),
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return
  const exited = new Promise((r) => child.once('exit', r))
  child.kill('SIGKILL')
  await exited
}

async function bareNode(): Promise<Memory> {
  const child = spawn(
    process.execPath,
    [...AGENT_NODE_FLAGS, '-e', 'process.stdout.write("r"); setInterval(() => {}, 1e9)'],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  )
  await new Promise((r) => child.stdout!.once('data', r))
  await sleep(SETTLE_MS)
  const m = rollup(child.pid!)
  await stop(child)
  return m
}

async function variant(
  flags: string[],
): Promise<{ idle: Memory; loaded: Memory; after: Memory; usPerRun: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'conch-agent-flags-'))
  const root = join(dir, 'root')
  mkdirSync(root)
  const socket = join(dir, 'agent.sock')
  const agent = spawn(
    process.execPath,
    [...AGENT_NODE_FLAGS, ...flags, resolve(bundle!), '--socket', socket, '--secretFd', '3', '--root', root],
    {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root },
    },
  )
  try {
    const secret = mintLinkSecret()
    const pipe = agent.stdio[3]
    if (pipe instanceof Writable) pipe.end(secret)
    let log = ''
    await new Promise<void>((ok, fail) => {
      agent.stderr!.on('data', (d: Buffer) => {
        log += d.toString()
        if (log.includes('agent listening')) ok()
      })
      agent.once('exit', (code) => fail(new Error(`agent exited with ${code}: ${log}`)))
    })
    const client = await AgentClient.connect(socket, secret)
    client.onFrame = (f) => {
      if (f.type === 'shell_out' || f.type === 'shell_err')
        client.send({ type: 'credit', ch: f.ch, bytes: f.payload.byteLength })
      return false
    }
    await client.call('session.attach', { sessionId: 'default', ch: 1 })
    await client.call('session.run', { sessionId: 'default', id: 'first', command: 'true', buffer: true })
    await sleep(SETTLE_MS)
    const idle = rollup(agent.pid!)
    let next = 0
    const t0 = performance.now()
    await Promise.all(
      Array.from({ length: WINDOW }, async () => {
        while (next < RUNS) {
          const i = next++
          const r = await client.call<{ stdout: string; exitCode: number }>('session.run', {
            sessionId: 'default',
            id: `r${i}`,
            command: `echo run-${i}`,
            buffer: true,
          })
          if (r.exitCode !== 0 || Buffer.from(r.stdout, 'base64').toString() !== `run-${i}\n`)
            throw new Error(`run ${i} mismatched`)
        }
      }),
    )
    const usPerRun = ((performance.now() - t0) * 1000) / RUNS
    const loaded = rollup(agent.pid!)
    // Past the idle release (idle-memory-release.ts: 15 s of quiet after a busy spell).
    await sleep(AFTER_MS)
    const after = rollup(agent.pid!)
    client.close()
    return { idle, loaded, after, usPerRun }
  } finally {
    await stop(agent)
    rmSync(dir, { recursive: true, force: true })
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!
const samples = new Map<string, Array<Awaited<ReturnType<typeof variant>>>>()
const refs: Memory[] = []
for (let round = 0; round < ROUNDS; round++) {
  refs.push(await bareNode())
  for (const [name, flags] of Object.entries(VARIANTS)) {
    const list = samples.get(name) ?? []
    list.push(await variant(flags))
    samples.set(name, list)
  }
}
const f = (x: number) => x.toFixed(1)
const ref = { rss: median(refs.map((r) => r.rss)), uss: median(refs.map((r) => r.uss)) }
const base = median(samples.get('AGENT_NODE_FLAGS')!.map((s) => s.usPerRun))
console.log(
  `bare node (same base flags): RSS ${f(ref.rss)} MB, USS ${f(ref.uss)} MB; ${RUNS} runs per variant, ${ROUNDS} rounds, medians`,
)
console.log(
  'variant | idle RSS | idle USS | idle USS ×bare | USS after runs | USS 22 s later | µs per run | ×AGENT_NODE_FLAGS',
)
for (const [name, list] of samples) {
  const m = (pick: (s: (typeof list)[number]) => number) => median(list.map(pick))
  const us = m((s) => s.usPerRun)
  console.log(
    `${name} | ${f(m((s) => s.idle.rss))} | ${f(m((s) => s.idle.uss))} | ${(m((s) => s.idle.uss) / ref.uss).toFixed(2)} | ${f(m((s) => s.loaded.uss))} | ${f(m((s) => s.after.uss))} | ${f(us)} | ${(us / base).toFixed(2)}`,
  )
}
