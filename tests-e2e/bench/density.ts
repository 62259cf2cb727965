// The density phase of `pnpm bench`: what N idle sandboxes, each with one session that has run
// one command, cost the host together. It sums the proportional set size (PSS: each shared page
// split between the processes that map it, so pages every agent shares count once in the sum)
// of every process of every sandbox (bwrap, the agent, its bash), and separately the memory
// their cgroups are charged (the kernel's own count: anonymous memory, the page cache the
// sandbox touched first, and kernel memory where the host accounts it). The reference is N bare
// Node processes with the agent's flags, idling, started in the same run: their summed PSS is
// what N processes of the same Node cost at the least.
//
// Slow (N sandbox starts), so opt-in: BENCH_PHASES=density BENCH_ROUNDS=1 pnpm --filter
// @conch/tests-e2e bench; BENCH_DENSITY_SANDBOXES sets N (100 by default).

import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { AGENT_NODE_FLAGS } from '@conch/protocol'
import { type CreateSandboxOptions, Sandbox } from '@conch/sdk'
import type { RunnerProcess } from '../harness/runner-process.ts'
import { sandboxProcesses } from './proc-memory.ts'
import type { RecordFigure } from './soak.ts'

const MB = 1e6
/** Quiet time before the figures are read, so start-up garbage is collected or paged. */
const SETTLE_MS = 5000
/** Sandboxes created at once. */
const CREATE_CONCURRENCY = 4

/** One process's memory from /proc/<pid>/smaps_rollup, in bytes. */
interface Rollup {
  rss: number
  pss: number
  /** Private_Clean + Private_Dirty: what leaving would free. */
  uss: number
  anon: number
}

function rollup(pid: number): Rollup {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
  const field = (name: string): number => {
    const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)
    return match ? Number(match[1]) * 1024 : 0
  }
  return {
    rss: field('Rss'),
    pss: field('Pss'),
    uss: field('Private_Clean') + field('Private_Dirty'),
    anon: field('Anonymous'),
  }
}

function sum(list: Rollup[]): Rollup {
  return list.reduce(
    (s, r) => ({ rss: s.rss + r.rss, pss: s.pss + r.pss, uss: s.uss + r.uss, anon: s.anon + r.anon }),
    { rss: 0, pss: 0, uss: 0, anon: 0 },
  )
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Starts `n` bare idle Node processes with the agent's flags; resolves once each has started. */
async function bareNodes(n: number): Promise<ChildProcess[]> {
  const children: ChildProcess[] = []
  for (let i = 0; i < n; i++) {
    const child = spawn(
      process.execPath,
      [...AGENT_NODE_FLAGS, '-e', 'process.stdout.write("ready\\n"); setInterval(() => {}, 1e9)'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    children.push(child)
    await new Promise<void>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`a bare node exited with ${code}`)))
      child.stdout!.once('data', () => resolve())
    })
  }
  return children
}

/** Starts N idle sandboxes with one session each and records what they cost together. */
export async function density(
  runner: RunnerProcess,
  connection: CreateSandboxOptions,
  count: number,
  record: RecordFigure,
  log: (message: string) => void,
): Promise<void> {
  const boxes: Sandbox[] = []
  const bare: ChildProcess[] = []
  try {
    bare.push(...(await bareNodes(count)))
    const t0 = performance.now()
    while (boxes.length < count) {
      const batch = Math.min(CREATE_CONCURRENCY, count - boxes.length)
      const made = await Promise.all(
        Array.from({ length: batch }, async () => {
          const box = await Sandbox.create(connection)
          const shell = await box.shell()
          const r = await shell.run('echo ready')
          if (r.stdout !== 'ready\n') throw new Error(`first run printed ${JSON.stringify(r.stdout)}`)
          return box
        }),
      )
      boxes.push(...made)
    }
    log(`density: ${count} sandboxes up in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    await sleep(SETTLE_MS)

    const trees = boxes.map((b) => sandboxProcesses(runner.sweepTarget, runner.pid, b.id))
    const all = sum(trees.flatMap((t) => t.all.map(rollup)))
    const agents = sum(trees.map((t) => rollup(t.agent)))
    const ref = sum(bare.map((c) => rollup(c.pid!)))
    const infos = await Promise.all(boxes.map((b) => b.refresh()))
    const charged = infos.reduce((s, i) => s + (i.usage?.memoryBytes ?? 0), 0)
    const measured = infos.filter((i) => i.usage).length

    const n = `${count} idle sandboxes`
    const refName = `reference: ${count} bare idle node processes, summed PSS`
    record(refName, 'MB', ref.pss / MB)
    record(`${n}: summed PSS of all their processes`, 'MB', all.pss / MB, refName)
    record(`${n}: summed PSS of their agents`, 'MB', agents.pss / MB, refName)
    record(`${n}: summed USS of their agents (private pages)`, 'MB', agents.uss / MB, refName)
    record(`${n}: summed RSS of their agents (shared pages counted in each)`, 'MB', agents.rss / MB)
    if (measured > 0) record(`${n}: summed memory their cgroups are charged`, 'MB', charged / MB, refName)
    record(`${n}: summed PSS as a share of 4 GB`, '%', (all.pss / 4e9) * 100)
    record('idle sandbox: PSS of all its processes (mean)', 'MB', all.pss / count / MB)
    record('idle agent: USS (mean)', 'MB', agents.uss / count / MB)
    record('idle agent: RSS (mean)', 'MB', agents.rss / count / MB)
    record('bare idle node: PSS (mean)', 'MB', ref.pss / count / MB)
    record('bare idle node: USS (mean)', 'MB', ref.uss / count / MB)
  } finally {
    for (const child of bare) child.kill('SIGKILL')
    for (let i = 0; i < boxes.length; i += 10) {
      await Promise.all(boxes.slice(i, i + 10).map((box) => box.destroy().catch(() => undefined)))
    }
  }
}
