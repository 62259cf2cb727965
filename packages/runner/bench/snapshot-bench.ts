// Snapshot and fork timings on one runner app (in process, through `inject`), per driver, each
// next to a reference measured in the same run on the same tree: `tar -cf` of the workspace
// for taking a snapshot, `tar -xf` of that archive for writing a workspace back. Workload: a
// workspace of BENCH_SNAPSHOT_FILES files (BENCH_SNAPSHOT_MB in all, half random bytes, half
// text) and 3 sessions with shell state. Figures, each the median of BENCH_SNAPSHOT_ROUNDS:
//   - snapshot: POST /snapshots, as a ratio to tar -cf;
//   - second snapshot after one file changed, as a ratio to the first (time and stored bytes);
//   - workspace restore (the store into an empty folder), as a ratio to tar -xf;
//   - fork: create from the snapshot → first result in a restored session, as a ratio to a
//     plain create → first result;
//   - 10 forks at once, wall time.
// Needs root for the namespace and gvisor drivers. Part of `pnpm bench`.
//
//   pnpm exec node --conditions=source packages/runner/bench/snapshot-bench.ts
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chownSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../src/app.ts'
import { generateApiKey, hashSecret } from '../src/credentials.ts'
import { GvisorDriver } from '../src/drivers/gvisor-driver.ts'
import { LocalDriver } from '../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import type { SandboxDriver } from '../src/drivers/sandbox-driver.ts'
import { SnapshotStore } from '../src/snapshots/snapshot-store.ts'
import { StateStore } from '../src/state-store.ts'

const FILES = Number(process.env.BENCH_SNAPSHOT_FILES ?? 1000)
const MB = Number(process.env.BENCH_SNAPSHOT_MB ?? 100)
const ROUNDS = Number(process.env.BENCH_SNAPSHOT_ROUNDS ?? 3)
const FORKS = Number(process.env.BENCH_SNAPSHOT_FORKS ?? 10)
const DRIVERS = (process.env.BENCH_SNAPSHOT_DRIVERS ?? 'local,namespace,gvisor').split(',')

function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}
const round2 = (n: number): number => Math.round(n * 100) / 100

const stateDir = mkdtempSync(join(tmpdir(), 'conch-bench-snapshots-'))
const scratch = join(stateDir, 'scratch')
mkdirSync(scratch)
const apiKey = generateApiKey()
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
  limits: { maxSandboxes: FORKS + 8 },
})
await app.ready()
const headers = { authorization: `Bearer ${apiKey}` }

async function call<T>(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object): Promise<T> {
  const res = await app.inject({ method, url, headers, ...(payload ? { payload } : {}) })
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

function hostWorkspace(id: string): string {
  const runtime = app.conch.manager.get(id)
  const driver = all[runtime.record.driver]!
  return driver.hostWorkspace!({ id, workdir: runtime.record.workdir, state: runtime.record.driverState })
}

async function firstResult(id: string, sessionId: string): Promise<void> {
  await call('POST', `/v1/sandboxes/${id}/exec`, { command: 'true', sessionId })
}

const report: Record<string, unknown> = {}
const made: string[] = []
try {
  for (const driver of DRIVERS) {
    const f: Record<string, number[]> = {
      snapshotMs: [],
      tarCreateMs: [],
      secondSnapshotMs: [],
      secondStoredBytes: [],
      firstStoredBytes: [],
      restoreWorkspaceMs: [],
      tarExtractMs: [],
      forkToFirstResultMs: [],
      createToFirstResultMs: [],
      forksWallMs: [],
    }
    for (let round = 0; round < ROUNDS; round++) {
      const { id } = await call<{ id: string }>('POST', '/v1/sandboxes', { driver })
      made.push(id)
      const workspace = hostWorkspace(id)
      fill(workspace)
      for (const s of ['default', 'build', 'test']) {
        await call('POST', `/v1/sandboxes/${id}/exec`, {
          command: `cd dir1; export S=${s}; f() { echo $S; }; alias ll='ls -l'`,
          sessionId: s,
        })
      }
      const archive = join(scratch, `ref-${driver}-${round}.tar`)
      f.tarCreateMs!.push(tar(['-C', workspace, '-cf', archive, '.']))
      const [first, snapMs] = await timed(() =>
        call<{ id: string; storedBytes: number }>('POST', `/v1/sandboxes/${id}/snapshots`, {}),
      )
      f.snapshotMs!.push(snapMs)
      f.firstStoredBytes!.push(first.storedBytes)
      writeFileSync(join(workspace, 'dir3', 'file3'), randomBytes(Math.floor((MB * 1e6) / FILES)))
      const [second, secondMs] = await timed(() =>
        call<{ id: string; storedBytes: number }>('POST', `/v1/sandboxes/${id}/snapshots`, {}),
      )
      f.secondSnapshotMs!.push(secondMs)
      f.secondStoredBytes!.push(second.storedBytes)

      const extractTo = join(scratch, `x-${driver}-${round}`)
      mkdirSync(extractTo)
      f.tarExtractMs!.push(tar(['-C', extractTo, '-xf', archive]))
      const restoreTo = join(scratch, `r-${driver}-${round}`)
      mkdirSync(restoreTo)
      const manifest = snapshots.get(first.id)
      const [, restoreMs] = await timed(() => snapshots.restoreWorkspace(manifest, restoreTo))
      f.restoreWorkspaceMs!.push(restoreMs)
      rmSync(extractTo, { recursive: true, force: true })
      rmSync(restoreTo, { recursive: true, force: true })
      rmSync(archive, { force: true })

      const [plain, plainMs] = await timed(async () => {
        const info = await call<{ id: string }>('POST', '/v1/sandboxes', { driver })
        await firstResult(info.id, 'default')
        return info
      })
      made.push(plain.id)
      f.createToFirstResultMs!.push(plainMs)
      const [fork, forkMs] = await timed(async () => {
        const info = await call<{ id: string }>('POST', '/v1/sandboxes', { fromSnapshot: first.id })
        await firstResult(info.id, 'build')
        return info
      })
      made.push(fork.id)
      f.forkToFirstResultMs!.push(forkMs)
      if (round === 0) {
        const [forks, wallMs] = await timed(() =>
          Promise.all(
            Array.from({ length: FORKS }, () =>
              call<{ id: string }>('POST', '/v1/sandboxes', { fromSnapshot: first.id }),
            ),
          ),
        )
        f.forksWallMs!.push(wallMs)
        for (const x of forks) await call('DELETE', `/v1/sandboxes/${x.id}`)
      }
      for (const x of [id, plain.id, fork.id]) {
        await call('DELETE', `/v1/sandboxes/${x}`)
        made.splice(made.indexOf(x), 1)
      }
      await call('DELETE', `/v1/snapshots/${first.id}`)
      await call('DELETE', `/v1/snapshots/${second.id}`)
    }
    const m = (k: string): number => median(f[k]!)
    report[driver] = {
      snapshotMs: round2(m('snapshotMs')),
      snapshotVsTarCreate: round2(m('snapshotMs') / m('tarCreateMs')),
      secondSnapshotVsFirst: round2(m('secondSnapshotMs') / m('snapshotMs')),
      secondStoredBytesVsFirst:
        Math.round((m('secondStoredBytes') / m('firstStoredBytes')) * 10_000) / 10_000,
      restoreWorkspaceMs: round2(m('restoreWorkspaceMs')),
      restoreWorkspaceVsTarExtract: round2(m('restoreWorkspaceMs') / m('tarExtractMs')),
      forkToFirstResultMs: round2(m('forkToFirstResultMs')),
      forkVsPlainCreate: round2(m('forkToFirstResultMs') / m('createToFirstResultMs')),
      [`forks${FORKS}WallMs`]: round2(m('forksWallMs')),
      tarCreateMs: round2(m('tarCreateMs')),
      tarExtractMs: round2(m('tarExtractMs')),
    }
  }
  process.stdout.write(
    `${JSON.stringify({ files: FILES, megabytes: MB, rounds: ROUNDS, sessions: 3, drivers: report }, null, 2)}\n`,
  )
} finally {
  for (const id of made) await app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers })
  await app.close()
  store.close()
  rmSync(stateDir, { recursive: true, force: true })
}
