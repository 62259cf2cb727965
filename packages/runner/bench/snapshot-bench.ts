// Snapshot and fork timings on runner apps (in process, through `inject`), per driver, each
// next to a reference measured in the same run on the same tree: `tar -cf` of the workspace
// for taking a snapshot, `tar -xf` of that archive for writing a workspace back, a plain
// create → first result for a fork. Two apps run interleaved round by round: `copy` (forks
// copy their workspace out of the store, as before overlays) and `overlay` (forks mount the
// snapshot's shared read-only tree, where the runner can). Workload: a workspace of
// BENCH_SNAPSHOT_FILES files (BENCH_SNAPSHOT_MB in all, half random bytes, half text) and 3
// sessions with shell state. Figures, each the median of BENCH_SNAPSHOT_ROUNDS:
//   - snapshot: POST /snapshots, as a ratio to tar -cf;
//   - second snapshot after one file changed, as a ratio to the first (time and stored bytes);
//   - a fork's snapshot after one file changed in it, as a ratio to the first snapshot;
//   - workspace restore: copy = the store into an empty folder, overlay = the shared tree
//     mounted (the tree already written, as after a snapshot), as a ratio to tar -xf;
//   - fork: create from the snapshot → first result in a restored session, as a ratio to a
//     plain create → first result;
//   - 10 forks at once, wall time.
// BENCH_DEBUG=1 prints every sample as it is taken. Needs root for the namespace and gvisor
// drivers. Part of `pnpm bench`.
//
//   pnpm exec node --conditions=source packages/runner/bench/snapshot-bench.ts
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chownSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp, type RunnerApp } from '../src/app.ts'
import { generateApiKey, hashSecret } from '../src/credentials.ts'
import { GvisorDriver } from '../src/drivers/gvisor-driver.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import type { SandboxDriver } from '../src/drivers/sandbox-driver.ts'
import { SnapshotStore } from '../src/snapshots/snapshot-store.ts'
import {
  mountWorkspaceOverlay,
  overlayDirOf,
  releaseWorkspaceOverlay,
} from '../src/snapshots/workspace-overlay.ts'
import { StateStore } from '../src/state-store.ts'

const FILES = Number(process.env.BENCH_SNAPSHOT_FILES ?? 1000)
const MB = Number(process.env.BENCH_SNAPSHOT_MB ?? 100)
const ROUNDS = Number(process.env.BENCH_SNAPSHOT_ROUNDS ?? 3)
const FORKS = Number(process.env.BENCH_SNAPSHOT_FORKS ?? 10)
const DRIVERS = (process.env.BENCH_SNAPSHOT_DRIVERS ?? 'local,namespace,gvisor').split(',')
const MODES = ['copy', 'overlay'] as const
type Mode = (typeof MODES)[number]

function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}
const round2 = (n: number): number => Math.round(n * 100) / 100

const apiKey = generateApiKey()
const headers = { authorization: `Bearer ${apiKey}` }

/** One runner app with its own state dir, drivers and snapshot store. */
interface Runner {
  mode: Mode
  stateDir: string
  scratch: string
  store: StateStore
  snapshots: SnapshotStore
  drivers: Record<string, SandboxDriver>
  app: RunnerApp
  made: string[]
}

async function runner(mode: Mode): Promise<Runner> {
  const stateDir = mkdtempSync(join(tmpdir(), `conch-bench-snapshots-${mode}-`))
  const scratch = join(stateDir, 'scratch')
  mkdirSync(scratch)
  const store = StateStore.open(stateDir)
  const snapshots = new SnapshotStore(stateDir, {
    maxSnapshots: 1000,
    maxSnapshotsPerSandbox: 1000,
    maxSnapshotBytes: 16 * 1024 ** 3,
    maxSnapshotEntries: 1_000_000,
  })
  const all: Record<string, SandboxDriver> = {
    local: new LocalDriver({ stateDir }),
    namespace: new NamespaceDriver({ stateDir }),
    gvisor: new GvisorDriver({ stateDir }),
  }
  const drivers = DRIVERS.map((d) => {
    const driver = all[d]
    if (!driver) throw new Error(`unknown driver ${d}`)
    return driver
  })
  const app = buildApp({
    store,
    apiKeyHashes: [hashSecret(apiKey)],
    drivers,
    snapshotStore: snapshots,
    snapshotOverlay: mode === 'copy' ? 'off' : 'auto',
    limits: { maxSandboxes: FORKS + 8 },
  })
  await app.ready()
  return { mode, stateDir, scratch, store, snapshots, drivers: all, app, made: [] }
}

async function call<T>(
  r: Runner,
  method: 'GET' | 'POST' | 'DELETE',
  url: string,
  payload?: object,
): Promise<T> {
  const res = await r.app.inject({ method, url, headers, ...(payload ? { payload } : {}) })
  if (res.statusCode !== 200) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`)
  return res.json() as T
}

function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now()
  return work().then((value) => [value, performance.now() - t0])
}

function tar(args: string[]): number {
  const t0 = performance.now()
  const r = spawnSync('tar', args, { stdio: ['ignore', 'ignore', 'pipe'] })
  if (r.status !== 0) throw new Error(`tar ${args.join(' ')}: ${r.stderr}`)
  return performance.now() - t0
}

/** Fills a workspace on the host, owned like its root. */
function fill(workspace: string): void {
  const owner = statSync(workspace)
  const per = Math.floor((MB * 1e6) / FILES)
  const text = Buffer.from(
    'the quick brown fox jumps over the lazy dog\n'.repeat(Math.ceil(per / 44)),
  ).subarray(0, per)
  for (let i = 0; i < FILES; i++) {
    const dir = join(workspace, `dir${i % 20}`)
    mkdirSync(dir, { recursive: true })
    chownSync(dir, owner.uid, owner.gid)
    const path = join(dir, `file${i}`)
    writeFileSync(path, i % 2 === 0 ? randomBytes(per) : text)
    chownSync(path, owner.uid, owner.gid)
  }
}

function hostWorkspace(r: Runner, id: string): string {
  const runtime = r.app.conch.manager.get(id)
  const driver = r.drivers[runtime.record.driver]!
  return driver.hostWorkspace!({ id, workdir: runtime.record.workdir, state: runtime.record.driverState })
}

async function firstResult(r: Runner, id: string, sessionId: string): Promise<void> {
  await call(r, 'POST', `/v1/sandboxes/${id}/exec`, { command: 'true', sessionId })
}

/** Waits until the tree written after a snapshot is there (it is written off the snapshot's reply). */
async function treeWritten(r: Runner, snapshotId: string): Promise<void> {
  const deadline = Date.now() + 300_000
  while (!r.snapshots.lowers.has(snapshotId)) {
    if (Date.now() > deadline) throw new Error(`the tree of ${snapshotId} was not written after a snapshot`)
    await new Promise((done) => setTimeout(done, 20))
  }
}

type Samples = Record<string, number[]>

/** One round of every figure for `driver` on runner `r`. */
async function measure(r: Runner, driver: string, round: number, f: Samples): Promise<void> {
  const push = (key: string, value: number): void => {
    if (process.env.BENCH_DEBUG) console.error(r.mode, key, value)
    f[key] ??= []
    f[key].push(value)
  }
  const { id } = await call<{ id: string }>(r, 'POST', '/v1/sandboxes', { driver })
  r.made.push(id)
  const workspace = hostWorkspace(r, id)
  fill(workspace)
  for (const s of ['default', 'build', 'test']) {
    await call(r, 'POST', `/v1/sandboxes/${id}/exec`, {
      command: `cd dir1; export S=${s}; f() { echo $S; }; alias ll='ls -l'`,
      sessionId: s,
    })
  }
  const archive = join(r.scratch, `ref-${driver}-${round}.tar`)
  push('tarCreateMs', tar(['-C', workspace, '-cf', archive, '.']))
  const [first, snapMs] = await timed(() =>
    call<{ id: string; storedBytes: number }>(r, 'POST', `/v1/sandboxes/${id}/snapshots`, {}),
  )
  push('snapshotMs', snapMs)
  push('firstStoredBytes', first.storedBytes)
  writeFileSync(join(workspace, 'dir3', 'file3'), randomBytes(Math.floor((MB * 1e6) / FILES)))
  const [second, secondMs] = await timed(() =>
    call<{ id: string; storedBytes: number }>(r, 'POST', `/v1/sandboxes/${id}/snapshots`, {}),
  )
  push('secondSnapshotMs', secondMs)
  push('secondStoredBytes', second.storedBytes)

  const extractTo = join(r.scratch, `x-${driver}-${round}`)
  mkdirSync(extractTo)
  push('tarExtractMs', tar(['-C', extractTo, '-xf', archive]))
  rmSync(extractTo, { recursive: true, force: true })
  rmSync(archive, { force: true })
  const manifest = r.snapshots.get(first.id)
  const restoreTo = join(r.scratch, `r-${driver}-${round}`, 'workspace')
  mkdirSync(restoreTo, { recursive: true })
  chownSync(restoreTo, statSync(workspace).uid, statSync(workspace).gid)
  if (r.mode === 'copy') {
    const [, restoreMs] = await timed(() => r.snapshots.restoreWorkspace(manifest, restoreTo))
    push('restoreWorkspaceMs', restoreMs)
  } else {
    await treeWritten(r, first.id)
    const [, restoreMs] = await timed(async () => {
      const lease = await r.snapshots.lowers.acquire(
        manifest,
        statSync(restoreTo).uid,
        overlayDirOf(restoreTo),
      )
      await mountWorkspaceOverlay(restoreTo, manifest.id, lease)
    })
    push('restoreWorkspaceMs', restoreMs)
    await releaseWorkspaceOverlay(restoreTo)
  }
  rmSync(join(r.scratch, `r-${driver}-${round}`), { recursive: true, force: true })

  const [plain, plainMs] = await timed(async () => {
    const info = await call<{ id: string }>(r, 'POST', '/v1/sandboxes', { driver })
    await firstResult(r, info.id, 'default')
    return info
  })
  r.made.push(plain.id)
  push('createToFirstResultMs', plainMs)
  const [fork, forkMs] = await timed(async () => {
    const info = await call<{ id: string }>(r, 'POST', '/v1/sandboxes', { fromSnapshot: first.id })
    await firstResult(r, info.id, 'build')
    return info
  })
  r.made.push(fork.id)
  push('forkToFirstResultMs', forkMs)
  await call(r, 'POST', `/v1/sandboxes/${fork.id}/exec`, {
    command: `head -c ${Math.floor((MB * 1e6) / FILES)} /dev/urandom > dir3/file3`,
  })
  const [forkSnap, forkSnapMs] = await timed(() =>
    call<{ id: string; storedBytes: number }>(r, 'POST', `/v1/sandboxes/${fork.id}/snapshots`, {}),
  )
  push('forkSnapshotMs', forkSnapMs)
  push('forkStoredBytes', forkSnap.storedBytes)
  const [forks, wallMs] = await timed(() =>
    Promise.all(
      Array.from({ length: FORKS }, () =>
        call<{ id: string }>(r, 'POST', '/v1/sandboxes', { fromSnapshot: first.id }),
      ),
    ),
  )
  push('forksWallMs', wallMs)
  for (const x of forks) await call(r, 'DELETE', `/v1/sandboxes/${x.id}`)
  for (const x of [id, plain.id, fork.id]) {
    await call(r, 'DELETE', `/v1/sandboxes/${x}`)
    r.made.splice(r.made.indexOf(x), 1)
  }
  for (const snap of [first.id, second.id, forkSnap.id]) await call(r, 'DELETE', `/v1/snapshots/${snap}`)
}

function figures(f: Samples): Record<string, number> {
  const m = (k: string): number => median(f[k]!)
  return {
    snapshotMs: round2(m('snapshotMs')),
    snapshotVsTarCreate: round2(m('snapshotMs') / m('tarCreateMs')),
    secondSnapshotMs: round2(m('secondSnapshotMs')),
    secondSnapshotVsFirst: round2(m('secondSnapshotMs') / m('snapshotMs')),
    secondStoredBytesVsFirst: Math.round((m('secondStoredBytes') / m('firstStoredBytes')) * 10_000) / 10_000,
    forkSnapshotMs: round2(m('forkSnapshotMs')),
    forkSnapshotVsFirst: round2(m('forkSnapshotMs') / m('snapshotMs')),
    forkStoredBytesVsFirst: Math.round((m('forkStoredBytes') / m('firstStoredBytes')) * 10_000) / 10_000,
    restoreWorkspaceMs: round2(m('restoreWorkspaceMs')),
    restoreWorkspaceVsTarExtract: round2(m('restoreWorkspaceMs') / m('tarExtractMs')),
    forkToFirstResultMs: round2(m('forkToFirstResultMs')),
    createToFirstResultMs: round2(m('createToFirstResultMs')),
    forkVsPlainCreate: round2(m('forkToFirstResultMs') / m('createToFirstResultMs')),
    [`forks${FORKS}WallMs`]: round2(m('forksWallMs')),
    [`forks${FORKS}WallVsPlainCreate`]: round2(m('forksWallMs') / m('createToFirstResultMs')),
    tarCreateMs: round2(m('tarCreateMs')),
    tarExtractMs: round2(m('tarExtractMs')),
  }
}

// The agents' links are unref'd sockets: a ref'd timer keeps the process up while it waits on them.
const keepAlive = setInterval(() => {}, 1000)
const runners = await Promise.all(MODES.map(runner))
const report: Record<string, Record<string, Record<string, number>>> = {}
try {
  for (const driver of DRIVERS) {
    const samples: Record<Mode, Samples> = { copy: {}, overlay: {} }
    for (let round = 0; round < ROUNDS; round++) {
      // A/B, then B/A: neither mode always runs on the warmer machine.
      const order = round % 2 === 0 ? runners : [...runners].reverse()
      for (const r of order) await measure(r, driver, round, samples[r.mode])
    }
    report[driver] = { copy: figures(samples.copy), overlay: figures(samples.overlay) }
  }
  process.stdout.write(
    `${JSON.stringify({ files: FILES, megabytes: MB, rounds: ROUNDS, sessions: 3, drivers: report }, null, 2)}\n`,
  )
} finally {
  clearInterval(keepAlive)
  for (const r of runners) {
    for (const id of r.made) await r.app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers })
    await r.app.close()
    r.store.close()
    rmSync(r.stateDir, { recursive: true, force: true })
  }
}
