// Runner memory benchmark: the runner's RSS idle, right after a burst of checked runs pipelined
// through one WebSocket, some seconds later, at its peak while one run streams `head -c` through
// `shell.stream`, and some seconds after that, for each way of starting it. Two references are
// measured in the same run: a bare Node process (`setInterval` and nothing else) and a bare
// fastify + @fastify/websocket server with the runner's node flags (one echo WebSocket route),
// the floor of a server built on the runner's framework, loaded from node_modules and bundled
// into one file as the packaged runner is.
//
//   node --conditions=source bench/runner-memory-bench.ts   (from packages/runner)
//   BENCH_RUNS=40000 BENCH_SETTLE_SECONDS=30 BENCH_STREAM_BYTES=1073741824 BENCH_VARIANTS=none,bin ...
//   BENCH_BASELINE_DIST=<dir>   adds `baseline`: a dist/ built from another commit, for before/after
//   BENCH_EXTRA_FLAGS='--flag …'  adds `dist-extra`: the built dist/conch.js with more node flags
//
// Variants: `none` (main.ts with no flags), `bin` (the bin, which adds RUNNER_NODE_FLAGS),
// `bin-arena2` (the bin with MALLOC_ARENA_MAX=2), `dist` (the built dist/conch.js, when
// `pnpm build` has made it), `dist-default-malloc` (the same without RUNNER_MALLOC_TUNABLES),
// `baseline` (see above) and `startup` (what the bin's start-again
// costs). Each runner gets a preload that writes process.memoryUsage() and V8's heap spaces to a
// file on SIGUSR2, so RSS can be split into heap, external and the rest.

import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Sandbox } from '@conch/sdk'
import { build } from 'esbuild'
import { COMMONJS_REQUIRE_BANNER } from '../scripts/runner-bundle.ts'
import { generateApiKey } from '../src/credentials.ts'
import { RUNNER_NODE_FLAGS } from '../src/runner-node-flags.ts'
import { listeningUrl } from './runner-listening.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const RUNS = Number(process.env.BENCH_RUNS ?? 40_000)
const DEPTH = Number(process.env.BENCH_DEPTH ?? 200)
const SETTLE_S = Number(process.env.BENCH_SETTLE_SECONDS ?? 30)
const STREAM_BYTES = Number(process.env.BENCH_STREAM_BYTES ?? 1024 ** 3)
const BASELINE_DIST = process.env.BENCH_BASELINE_DIST
const MB = 1e6

interface Variant {
  name: string
  args: string[]
  env: Record<string, string>
}

const VARIANTS: Variant[] = [
  { name: 'none', args: ['--conditions=source', join(ROOT, 'src', 'main.ts')], env: {} },
  { name: 'bin', args: ['--conditions=source', join(ROOT, 'src', 'bin.ts')], env: {} },
  {
    name: 'bin-arena2',
    args: ['--conditions=source', join(ROOT, 'src', 'bin.ts')],
    env: { MALLOC_ARENA_MAX: '2' },
  },
  { name: 'dist', args: [join(ROOT, 'dist', 'conch.js')], env: {} },
  // An empty GLIBC_TUNABLES counts as the operator's: the bin adds no malloc settings.
  { name: 'dist-default-malloc', args: [join(ROOT, 'dist', 'conch.js')], env: { GLIBC_TUNABLES: '' } },
  ...(process.env.BENCH_EXTRA_FLAGS
    ? [
        {
          name: 'dist-extra',
          args: [...process.env.BENCH_EXTRA_FLAGS.split(' '), join(ROOT, 'dist', 'conch.js')],
          env: {},
        },
      ]
    : []),
  ...(BASELINE_DIST ? [{ name: 'baseline', args: [join(BASELINE_DIST, 'conch.js')], env: {} }] : []),
]

/** A field of /proc/<pid>/status or smaps_rollup, in bytes. */
function procField(pid: number, file: 'status' | 'smaps_rollup', field: string): number {
  const text = readFileSync(`/proc/${pid}/${file}`, 'utf8')
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024
}

interface Figure {
  rss: number
  anon: number
  file: number
  heapUsed?: number
  heapTotal?: number
  external?: number
  arrayBuffers?: number
  newSpace?: number
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** RSS and its anonymous and file parts of `pid`; with `dump`, also what V8 reports. */
async function figure(pid: number, dump?: string): Promise<Figure> {
  const out: Figure = {
    rss: procField(pid, 'status', 'VmRSS'),
    anon: procField(pid, 'status', 'RssAnon'),
    file: procField(pid, 'status', 'RssFile'),
  }
  if (dump) {
    rmSync(dump, { force: true })
    process.kill(pid, 'SIGUSR2')
    for (let i = 0; i < 50 && !existsSync(dump); i++) await sleep(20)
    if (existsSync(dump)) {
      await sleep(20)
      Object.assign(out, JSON.parse(readFileSync(dump, 'utf8')))
    }
  }
  return out
}

/** Writes process.memoryUsage() and the new space's size to MEMORY_DUMP on SIGUSR2. */
const PRELOAD = `data:text/javascript,${encodeURIComponent(
  `import { writeFileSync } from 'node:fs'; import v8 from 'node:v8';
   process.on('SIGUSR2', () => { const m = process.memoryUsage();
     const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
     writeFileSync(process.env.MEMORY_DUMP, JSON.stringify({ heapUsed: m.heapUsed, heapTotal: m.heapTotal,
       external: m.external, arrayBuffers: m.arrayBuffers, newSpace: s ? s.space_size : 0 })) })`,
)}`

async function startRunner(variant: Variant, dir: string): Promise<{ child: ChildProcess; url: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CONCH_')))
  const child = spawn(
    process.execPath,
    [`--import=${PRELOAD}`, ...variant.args, 'runner', '--port', '0', '--state-dir', join(dir, 'state')],
    {
      env: {
        ...clean,
        ...variant.env,
        MEMORY_DUMP: join(dir, 'memory.json'),
        CONCH_API_KEY: API_KEY,
        CONCH_DRIVER: 'local',
        CONCH_UNSAFE_LOCAL: '1',
        CONCH_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  const url = await listeningUrl(child, `${variant.name}`)
  return { child, url }
}

const API_KEY = generateApiKey()

interface Result {
  idle: Figure
  loaded: Figure
  settled: Figure
  /** Peak RSS (VmHWM, reset just before) while one run streamed STREAM_BYTES. */
  streamPeak: number
  afterStream: Figure
  mismatches: number
}

/** Resets the kernel's peak-RSS mark of `pid` to its current RSS. */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5')
}

async function measure(variant: Variant): Promise<Result> {
  const dir = mkdtempSync(join(tmpdir(), 'conch-runner-memory-'))
  const dump = join(dir, 'memory.json')
  const { child, url } = await startRunner(variant, dir)
  const pid = child.pid!
  try {
    const sandbox = await Sandbox.create({ url, apiKey: API_KEY, driver: 'local' })
    const shell = await sandbox.shell()
    await shell.run('true')
    // Idle means quiet for as long as the settle after the load: the same chance to give back.
    await sleep(SETTLE_S * 1000)
    const idle = await figure(pid, dump)
    let next = 0
    let mismatches = 0
    await Promise.all(
      Array.from({ length: DEPTH }, async () => {
        while (next < RUNS) {
          const i = next++
          const r = await shell.run(`echo r${i}`)
          if (r.stdout !== `r${i}\n` || r.exitCode !== 0) mismatches += 1
        }
      }),
    )
    const loaded = await figure(pid, dump)
    await sleep(SETTLE_S * 1000)
    const settled = await figure(pid, dump)
    resetPeak(pid)
    let received = 0
    for await (const event of shell.stream(`head -c ${STREAM_BYTES} /dev/zero`, { timeoutMs: 600_000 })) {
      if (event.type === 'exit') mismatches += event.exitCode === 0 ? 0 : 1
      else received += event.data.length
    }
    if (received !== STREAM_BYTES) mismatches += 1
    const streamPeak = procField(pid, 'status', 'VmHWM')
    await sleep(SETTLE_S * 1000)
    const afterStream = await figure(pid, dump)
    await shell.close()
    await sandbox.destroy()
    return { idle, loaded, settled, streamPeak, afterStream, mismatches }
  } finally {
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
}

/** `MB (×ratio to ref)`. */
function mb(bytes: number, ref: number): string {
  return `${(bytes / MB).toFixed(0)} MB ×${(bytes / ref).toFixed(2)}`
}

function show(f: Figure, ref: number): string {
  const v8 =
    f.heapUsed === undefined
      ? ''
      : ` heap ${(f.heapUsed / MB).toFixed(1)}/${(f.heapTotal! / MB).toFixed(0)} new ${(f.newSpace! / MB).toFixed(1)} ext ${(f.external! / MB).toFixed(1)}`
  return `${(f.rss / MB).toFixed(0)} MB (×${(f.rss / ref).toFixed(2)}, anon ${(f.anon / MB).toFixed(0)}${v8})`
}

/** Milliseconds from spawn to a child's exit (`node -e 0`) or to the runner's listening line. */
async function startMs(args: string[], dir: string): Promise<number> {
  const t0 = performance.now()
  const child = spawn(process.execPath, args, {
    env: { ...process.env, CONCH_API_KEY: API_KEY, CONCH_DRIVER: 'local', CONCH_UNSAFE_LOCAL: '1' },
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  await new Promise<void>((resolve) => {
    let out = ''
    child.stdout?.on('data', (d) => {
      out += d
      if (out.includes('listening on')) resolve()
    })
    void exited.then(() => resolve())
  })
  const ms = performance.now() - t0
  // SIGTERM, not SIGKILL: a stopping runner ends its warm pool's agents and waits for the agent
  // compile-cache fill they started, which would otherwise outlive it and write into `dir` after
  // (or while) it is removed.
  child.kill('SIGTERM')
  await exited
  rmSync(dir, { recursive: true, force: true })
  return ms
}

/**
 * What the bin's start-again costs: the packaged runner's time to listen when started without
 * its flags (the bin execs Node again) and with them (it does not), beside `node -e 0`.
 */
async function startupCost(rounds: number): Promise<void> {
  const bin = join(ROOT, 'dist', 'conch.js')
  const runner = (flags: string[]) => async () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-runner-start-'))
    return startMs([...flags, bin, 'runner', '--port', '0', '--state-dir', join(dir, 'state')], dir)
  }
  const kinds: [string, () => Promise<number>][] = [
    ['node -e 0', () => startMs(['-e', '0'], mkdtempSync(join(tmpdir(), 'conch-node-')))],
    ['runner, flags given', runner([...RUNNER_NODE_FLAGS])],
    ['runner, bin execs again', runner([])],
  ]
  const times = new Map<string, number[]>(kinds.map(([k]) => [k, []]))
  for (let r = 0; r < rounds; r++) for (const [k, f] of kinds) times.get(k)!.push(await f())
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const ref = median(times.get('node -e 0')!)
  for (const [k, xs] of times)
    console.log(
      `start: ${k}: median ${median(xs).toFixed(0)} ms (×${(median(xs) / ref).toFixed(2)} of node -e 0)`,
    )
}

/** The bare fastify reference: the runner's framework, its node flags, one echo WebSocket route. */
const BARE_FASTIFY = `
  import Fastify from 'fastify'
  import websocket from '@fastify/websocket'
  const app = Fastify({ logger: false })
  await app.register(websocket)
  app.get('/ws', { websocket: true }, (socket) => socket.on('message', (m) => socket.send(m)))
  await app.listen({ host: '127.0.0.1', port: 0 })
  console.log('listening')`

const bare = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e9)'], { stdio: 'ignore' })
const bareFastify = spawn(
  process.execPath,
  [...RUNNER_NODE_FLAGS, '--input-type=module', '-e', BARE_FASTIFY],
  {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  },
)
// The same server bundled into one file as the packaged runner is (scripts/runner-bundle.ts):
// the like-for-like floor for `dist` and `baseline`, since bundling alone changes what Node loads.
const bundleDir = mkdtempSync(join(tmpdir(), 'conch-bare-fastify-'))
const bundled = join(bundleDir, 'bare-fastify.mjs')
await build({
  stdin: { contents: BARE_FASTIFY, resolveDir: ROOT, loader: 'js' },
  outfile: bundled,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  banner: { js: COMMONJS_REQUIRE_BANNER },
  charset: 'ascii',
  legalComments: 'none',
  logLevel: 'warning',
})
const bareFastifyBundled = spawn(process.execPath, [...RUNNER_NODE_FLAGS, bundled], {
  stdio: ['ignore', 'pipe', 'inherit'],
})
try {
  await new Promise<void>((resolve) => bareFastify.stdout.once('data', () => resolve()))
  await new Promise<void>((resolve) => bareFastifyBundled.stdout.once('data', () => resolve()))
  await sleep(SETTLE_S * 1000)
  const ref = await figure(bare.pid!)
  const fastifyRef = await figure(bareFastify.pid!)
  const bundledRef = await figure(bareFastifyBundled.pid!)
  console.log(`bare node: ${(ref.rss / MB).toFixed(0)} MB RSS, anon ${(ref.anon / MB).toFixed(0)} MB`)
  console.log(
    `bare fastify + ws (runner flags): ${(fastifyRef.rss / MB).toFixed(0)} MB RSS, anon ${(fastifyRef.anon / MB).toFixed(0)} MB`,
  )
  console.log(
    `bare fastify + ws, bundled into one file (runner flags): ${(bundledRef.rss / MB).toFixed(0)} MB RSS, anon ${(bundledRef.anon / MB).toFixed(0)} MB`,
  )
  const wanted = (process.env.BENCH_VARIANTS ?? 'none,bin,dist,baseline,startup').split(',')
  if (wanted.includes('startup') && existsSync(join(ROOT, 'dist', 'conch.js'))) await startupCost(7)
  for (const variant of VARIANTS.filter((v) => wanted.includes(v.name))) {
    if (variant.name === 'dist' && !existsSync(variant.args[0]!)) {
      console.log('dist: skipped (no dist/conch.js; run pnpm build first)')
      continue
    }
    const r = await measure(variant)
    console.log(
      `${variant.name}: idle ${show(r.idle, ref.rss)} | after ${RUNS} runs ${show(r.loaded, ref.rss)} | ${SETTLE_S} s later ${show(r.settled, ref.rss)} | mismatches ${r.mismatches}`,
    )
    console.log(
      `${variant.name}, ratios to bundled bare fastify: idle ${mb(r.idle.rss, bundledRef.rss)} (anon ${mb(r.idle.anon, bundledRef.anon)}) | after runs ${mb(r.loaded.rss, bundledRef.rss)} | ${SETTLE_S} s later ${mb(r.settled.rss, bundledRef.rss)} | peak streaming ${mb(r.streamPeak, bundledRef.rss)}`,
    )
    console.log(
      `${variant.name}, ratios to bare fastify: idle ${mb(r.idle.rss, fastifyRef.rss)} (anon ${mb(r.idle.anon, fastifyRef.anon)}) | after runs ${mb(r.loaded.rss, fastifyRef.rss)} | ${SETTLE_S} s later ${mb(r.settled.rss, fastifyRef.rss)} | peak streaming ${STREAM_BYTES} B ${mb(r.streamPeak, fastifyRef.rss)} | ${SETTLE_S} s after ${show(r.afterStream, fastifyRef.rss)}`,
    )
  }
} finally {
  bare.kill()
  bareFastify.kill()
  bareFastifyBundled.kill()
  rmSync(bundleDir, { recursive: true, force: true })
}
