// Agent-level benchmark of a new shell's first run. Each sample is a fresh node process (a new
// agent compiles its run path on first use, as a new sandbox's agent does) that builds the
// agent, lets its spare shell start, then times run 1 and run 2 (`true`) in a session that
// takes the spare (warmed up) and in one that starts its own shell, against bash over pipes
// doing its first and second command in the same process. Run 1 follows an idle pause, run 2
// follows run 1 at once, and run 3 follows the same pause again: run 3 is what an idle shell
// costs anyway, so run 1 over run 3 is the first run's own cost. Samples alternate the two sessions'
// order. `FIRST_RUN_BENCH_ROUNDS` sets the number of processes (default 10).
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { buildAgent } from '../src/build-agent.ts'
import { systemClock } from '../src/clock.ts'
import { silentLogger } from '../src/logger.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'

/** Run 1, run 2 right after it, and run 3 after the same idle pause as run 1. */
type Sample = Record<'spare' | 'own' | 'bare', [number, number, number]>

/** The idle time before run 1 (a client's request arrives some time after the create). */
const pause = () => new Promise((resolve) => setTimeout(resolve, 50))

/** bash over pipes: first and second command, each answered by a marker line. */
async function bare(): Promise<[number, number, number]> {
  const bash = spawn('bash', ['--noprofile', '--norc', '--noediting', '-i'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let buffer = ''
  const wait = (marker: string) =>
    new Promise<void>((resolve) => {
      const on = (chunk: Buffer) => {
        buffer += chunk.toString()
        if (!buffer.includes(marker)) return
        bash.stdout.off('data', on)
        buffer = ''
        resolve()
      }
      bash.stdout.on('data', on)
    })
  bash.stdin.write('PS1= PS2=; echo ready\n')
  await wait('ready')
  await pause()
  const t0 = performance.now()
  bash.stdin.write('true; echo m1\n')
  await wait('m1')
  const t1 = performance.now()
  bash.stdin.write('true; echo m2\n')
  await wait('m2')
  const t2 = performance.now()
  await pause()
  const t3 = performance.now()
  bash.stdin.write('true; echo m3\n')
  await wait('m3')
  const t4 = performance.now()
  bash.kill('SIGKILL')
  return [t1 - t0, t2 - t1, t4 - t3]
}

async function child(ownFirst: boolean): Promise<Sample> {
  const dir = mkdtempSync(join(tmpdir(), 'conch-first-run-'))
  const { server, sessions } = buildAgent({
    root: dir,
    baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    spawn: nodeSpawn,
    clock: systemClock,
    logger: silentLogger,
    tempRoot: chooseTempRoot(),
    killGraceMs: 300,
    linkSecret: mintLinkSecret(),
  })
  sessions.prepareSpare()
  // The spare starts when the agent listens; a create comes later.
  await new Promise((r) => setTimeout(r, 200))
  const twoRuns = async (id: string, env?: Record<string, string>): Promise<[number, number, number]> => {
    const s = await sessions.create({ id, ...(env ? { env } : {}) })
    await pause()
    const t0 = performance.now()
    await s.run({ runId: `${id}-1`, command: 'true' })
    const t1 = performance.now()
    await s.run({ runId: `${id}-2`, command: 'true' })
    const t2 = performance.now()
    await pause()
    const t3 = performance.now()
    await s.run({ runId: `${id}-3`, command: 'true' })
    return [t1 - t0, t2 - t1, performance.now() - t3]
  }
  const sample = {} as Sample
  if (ownFirst) sample.own = await twoRuns('own', { OWN: '1' })
  sample.spare = await twoRuns('spare')
  if (!ownFirst) sample.own = await twoRuns('own', { OWN: '1' })
  sample.bare = await bare()
  await server.close()
  await sessions.closeAll()
  rmSync(dir, { recursive: true, force: true })
  return sample
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

if (process.argv[2] === '--child') {
  process.stdout.write(JSON.stringify(await child(process.argv[3] === 'own-first')))
} else {
  const rounds = Number(process.env.FIRST_RUN_BENCH_ROUNDS ?? 10)
  const samples: Sample[] = []
  for (let i = 0; i < rounds; i++) {
    const args = [
      '--conditions=source',
      process.argv[1]!,
      '--child',
      i % 2 === 0 ? 'own-first' : 'spare-first',
    ]
    const out = spawnSync(process.execPath, args, { encoding: 'utf8' })
    if (out.status !== 0) throw new Error(`sample ${i} failed: ${out.stderr}`)
    samples.push(JSON.parse(out.stdout) as Sample)
  }
  const bareFirst = median(samples.map((s) => s.bare[0]))
  console.log(`${rounds} fresh agent processes; medians in ms; ratios to bash over pipes' first command`)
  for (const kind of ['spare', 'own', 'bare'] as const) {
    const first = median(samples.map((s) => s[kind][0]))
    const second = median(samples.map((s) => s[kind][1]))
    const third = median(samples.map((s) => s[kind][2]))
    console.log(
      `${kind.padEnd(6)} run 1 ${first.toFixed(2)}  run 2 ${second.toFixed(2)}  run 3 (after a pause) ${third.toFixed(2)}  run1/run2 ${(first / second).toFixed(2)}x  run1/run3 ${(first / third).toFixed(2)}x  run1/bare run 1 ${(first / bareFirst).toFixed(2)}x`,
    )
  }
}
