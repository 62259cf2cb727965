// `pnpm --filter @conch/agent bench:first-runs`: how a new agent's per-run cost falls over its
// first runs (V8 compiles the run path lazily and tiers it up as it gets hot). Each sample is a
// fresh agent process, started as drivers start it (`AGENT_NODE_FLAGS`, the compile cache, the
// bundle when given), left idle as a pooled sandbox would be (`FIRST_RUNS_IDLE_MS`), then driven
// through the runner's path (unbuffered runs of `true` on an attached channel, each ended by
// `shell_exit`) for `FIRST_RUNS_COUNT` runs and `FIRST_RUNS_WARM` more. Per bucket of runs it
// reports the median client-observed latency and the agent's CPU per run (every thread's
// `schedstat`, in ns), each as a ratio to the same agent's warm runs (the last `FIRST_RUNS_WARM`)
// and to bash over pipes (`true; echo`) measured in the same round. Variants (`FIRST_RUNS_VARIANTS`,
// `name=words;name=words`, rounds interleaved) are made of words: `--flag`s added after
// `AGENT_NODE_FLAGS`; `NAME=value`, added to the agent's environment; `ENTRY=<file>`, another
// agent file (e.g. another checkout's bundle); `LINKWARM=<n>`, n runs in a session of their own,
// deleted before the idle time (what the runner's warm pool does, pool-warm-up.ts).
//
//   pnpm --filter @conch/runner build
//   pnpm --filter @conch/agent bench:first-runs [packages/runner/dist/conch-agent.mjs]
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { Writable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { AGENT_NODE_FLAGS, compileCacheFlag } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { AgentClient } from '../test/agent-client.ts'

const here = dirname(fileURLToPath(import.meta.url))
const defaultEntry = resolve(process.argv[2] ?? join(here, '..', 'src', 'main.ts'))
const ROUNDS = Number(process.env.FIRST_RUNS_ROUNDS ?? 3)
const COUNT = Number(process.env.FIRST_RUNS_COUNT ?? 2000)
const WARM = Number(process.env.FIRST_RUNS_WARM ?? 500)
const IDLE_MS = Number(process.env.FIRST_RUNS_IDLE_MS ?? 1500)
const BUCKETS: [number, number][] = [
  [1, 1],
  [2, 10],
  [11, 50],
  [51, 200],
  [201, 500],
  [501, 1000],
  [1001, 1500],
  [1501, 2000],
].filter(([from]) => from !== undefined && from <= COUNT) as [number, number][]

const VARIANTS: [string, string[]][] = (process.env.FIRST_RUNS_VARIANTS ?? 'AGENT_NODE_FLAGS=')
  .split(';')
  .map((spec) => {
    const eq = spec.indexOf('=')
    return [
      spec.slice(0, eq),
      spec
        .slice(eq + 1)
        .split(' ')
        .filter((f) => f !== ''),
    ]
  })

/** CPU time of every thread of `pid` so far, in ns (`schedstat`'s first field). */
function threadsCpuNs(pid: number): number {
  let total = 0
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[0])
    } catch {
      // A thread that ended between the listing and the read counts no more.
    }
  }
  return total
}

/** Resident memory of `pid`, in MB. */
function rssMb(pid: number): number {
  const text = readFileSync(`/proc/${pid}/status`, 'latin1')
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(text)?.[1] ?? 0) / 1024
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN

/** bash on pipes, `true; echo` per run: median ms per sequential run over `n` runs. */
async function bashOverPipes(n: number): Promise<number> {
  const bash = spawn('bash', ['--noprofile', '--norc'], { stdio: ['pipe', 'pipe', 'ignore'] })
  let waiter: (() => void) | null = null
  bash.stdout.on('data', () => waiter?.())
  const times: number[] = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await new Promise<void>((done) => {
      waiter = done
      bash.stdin.write('true; echo\n')
    })
    times.push(performance.now() - t)
  }
  bash.kill()
  return median(times.slice(n / 5))
}

interface Sample {
  /** Per bucket: median latency (ms) and CPU per run (µs). */
  buckets: { ms: number; cpuUs: number }[]
  warm: { ms: number; cpuUs: number }
  bare: number
  listenMs: number
  rssIdle: number
  rssAfter: number
}

async function sample(words: string[]): Promise<Sample> {
  // `ENTRY=<file>` runs another agent file (e.g. another checkout's bundle) for this variant.
  const entry = resolve(words.find((w) => w.startsWith('ENTRY='))?.slice(6) ?? defaultEntry)
  const flags = words.filter((w) => !w.startsWith('ENTRY=') && !w.startsWith('LINKWARM='))
  const dir = mkdtempSync(join(tmpdir(), 'conch-first-runs-'))
  const root = join(dir, 'root')
  mkdirSync(root)
  // The compile cache lives in the temp dir, one per entry file, so no checkout gains files.
  const cache = join(
    tmpdir(),
    `conch-first-runs-cache-${createHash('sha256').update(entry).digest('hex').slice(0, 12)}`,
  )
  const socketPath = join(dir, 'agent.sock')
  const t0 = performance.now()
  const agent = spawn(
    process.execPath,
    [
      ...AGENT_NODE_FLAGS,
      ...flags.filter((f) => f.startsWith('--')),
      ...(entry.endsWith('.ts') ? ['--conditions=source'] : [compileCacheFlag(cache)]),
      entry,
      '--socket',
      socketPath,
      '--secretFd',
      '3',
      '--root',
      root,
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: root,
        ...Object.fromEntries(flags.filter((f) => !f.startsWith('--')).map((f) => f.split('=', 2))),
      },
    },
  )
  const secret = mintLinkSecret()
  const secretPipe = agent.stdio[3]
  if (secretPipe instanceof Writable) secretPipe.end(secret)
  await new Promise<void>((ok, fail) => {
    agent.stderr?.on('data', (d: Buffer) => {
      if (d.toString().includes('agent listening')) ok()
    })
    agent.once('exit', (code) => fail(new Error(`agent exited with ${code}`)))
  })
  const listenMs = performance.now() - t0
  const pid = agent.pid ?? 0
  const client = await AgentClient.connect(socketPath, secret)
  // `LINKWARM=<n>`: before the idle time, n runs through the link on a session of its own
  // (another shape than the spare's, so the spare stays), which is then deleted: a warm-up a
  // runner could drive on a pooled sandbox before offering it.
  const linkWarm = Number(words.find((w) => w.startsWith('LINKWARM='))?.slice(9) ?? 0)
  if (linkWarm > 0) {
    await client.call('session.create', { id: 'warm-up', env: { CONCH_WARM_UP: '1' } })
    await client.call('session.attach', { sessionId: 'warm-up', ch: 9 })
    for (let i = 0; i < linkWarm; i++) {
      await client.call('session.run', {
        sessionId: 'warm-up',
        id: `w${i}`,
        command: i % 2 === 0 ? 'true' : 'printf .',
        buffer: true,
      })
    }
    client.send({ type: 'close', ch: 9 })
    await client.call('session.delete', { sessionId: 'warm-up' })
  }
  await sleep(IDLE_MS)
  const rssIdle = rssMb(pid)
  const ch = 1
  let ended: ((id: string) => void) | null = null
  client.onFrame = (f) => {
    if (f.type === 'shell_exit' && f.ch === ch) ended?.(f.id)
    else if ((f.type === 'shell_out' || f.type === 'shell_err') && f.ch === ch)
      client.send({ type: 'credit', ch, bytes: f.payload.byteLength })
    return false
  }
  await client.call('session.attach', { sessionId: 'default', ch })
  let id = 0
  const times: number[] = []
  const cpuAt: number[] = [threadsCpuNs(pid)]
  for (let i = 0; i < COUNT + WARM; i++) {
    const runId = `r${++id}`
    const t = performance.now()
    await new Promise<void>((done) => {
      ended = (endedId) => {
        if (endedId === runId) done()
      }
      void client.call('session.run', { sessionId: 'default', id: runId, command: 'true', buffer: false })
    })
    times.push(performance.now() - t)
    cpuAt.push(threadsCpuNs(pid))
  }
  const rssAfter = rssMb(pid)
  client.close()
  agent.kill('SIGTERM')
  await new Promise((done) => agent.once('exit', done))
  rmSync(dir, { recursive: true, force: true })
  const span = (from: number, to: number) => ({
    ms: median(times.slice(from - 1, to)),
    cpuUs: (cpuAt[to]! - cpuAt[from - 1]!) / 1000 / (to - from + 1),
  })
  return {
    buckets: BUCKETS.map(([from, to]) => span(from, to)),
    warm: span(COUNT + 1, COUNT + WARM),
    bare: await bashOverPipes(400),
    listenMs,
    rssIdle,
    rssAfter,
  }
}

const samples = new Map<string, Sample[]>(VARIANTS.map(([name]) => [name, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, flags] of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()) {
    samples.get(name)!.push(await sample(flags))
  }
}

const f = (n: number, d = 2) => n.toFixed(d)
console.log(`first runs of a fresh agent (${defaultEntry}), idle ${IDLE_MS} ms, medians of ${ROUNDS} rounds`)
for (const [name, list] of samples) {
  const m = (pick: (s: Sample) => number) => median(list.map(pick))
  console.log(
    `\n${name} [${VARIANTS.find(([n]) => n === name)![1].join(' ')}]: listening ${f(
      m((s) => s.listenMs),
      0,
    )} ms, RSS idle ${f(
      m((s) => s.rssIdle),
      1,
    )} MB, after ${f(
      m((s) => s.rssAfter),
      1,
    )} MB; warm run ${f(
      m((s) => s.warm.ms),
      3,
    )} ms (${f(m((s) => s.warm.ms / s.bare))}x bash over pipes), ${f(
      m((s) => s.warm.cpuUs),
      0,
    )} µs CPU`,
  )
  console.log(
    `${'runs'.padEnd(11)} ${'ms p50'.padStart(8)} ${'x warm'.padStart(7)} ${'x bare'.padStart(7)} ${'CPU µs'.padStart(8)} ${'x warm'.padStart(7)}`,
  )
  BUCKETS.forEach(([from, to], i) => {
    console.log(
      [
        `${from}-${to}`.padEnd(11),
        f(
          m((s) => s.buckets[i]!.ms),
          3,
        ).padStart(8),
        f(m((s) => s.buckets[i]!.ms / s.warm.ms)).padStart(7),
        f(m((s) => s.buckets[i]!.ms / s.bare)).padStart(7),
        f(
          m((s) => s.buckets[i]!.cpuUs),
          0,
        ).padStart(8),
        f(m((s) => s.buckets[i]!.cpuUs / s.warm.cpuUs)).padStart(7),
      ].join(' '),
    )
  })
  const total = m(
    (s) => s.buckets.reduce((sum, b, i) => sum + b.cpuUs * (BUCKETS[i]![1] - BUCKETS[i]![0] + 1), 0) / 1000,
  )
  const warmTotal = m((s) => (s.warm.cpuUs * COUNT) / 1000)
  console.log(`agent CPU over runs 1-${COUNT}: ${f(total, 0)} ms (warm rate would be ${f(warmTotal, 0)} ms)`)
}
