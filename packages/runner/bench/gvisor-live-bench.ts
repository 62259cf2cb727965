// Live (checkpoint) snapshots under the gVisor driver, each figure next to a plain gVisor create
// measured in the same run: a sandbox with a shell running a counting loop and a background
// `sleep` is snapshotted (the agent suspends its link, `runsc checkpoint`, the image and the
// workspace are stored, the sandbox is restored in place) and forked (`runsc restore` of the
// image into a new sandbox → first result in the restored shell). Figures, each the median of
// BENCH_LIVE_ROUNDS:
//   - createToFirstResultMs: plain create → first result (the reference);
//   - liveSnapshotMs, as a ratio to the reference;
//   - liveForkToFirstResultMs, as a ratio to the reference;
//   - imageBytes: the checkpoint image's size.
// Needs root and runsc.
//
//   pnpm exec node --conditions=source packages/runner/bench/gvisor-live-bench.ts
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../src/app.ts'
import { generateApiKey, hashSecret } from '../src/credentials.ts'
import { GvisorDriver } from '../src/drivers/gvisor-driver.ts'
import { SnapshotStore } from '../src/snapshots/snapshot-store.ts'
import { StateStore } from '../src/state-store.ts'

const ROUNDS = Number(process.env.BENCH_LIVE_ROUNDS ?? 3)

function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN
}
const round2 = (n: number): number => Math.round(n * 100) / 100

const stateDir = mkdtempSync(join(tmpdir(), 'conch-bench-live-'))
const apiKey = generateApiKey()
const store = StateStore.open(stateDir)
const driver = new GvisorDriver({ stateDir })
const problem = driver.problem()
if (problem) throw new Error(`this host cannot run gVisor sandboxes: ${problem}`)
const app = buildApp({
  store,
  apiKeyHashes: [hashSecret(apiKey)],
  drivers: [driver],
  snapshotStore: new SnapshotStore(stateDir),
})
await app.ready()
const headers = { authorization: `Bearer ${apiKey}` }

async function call<T>(method: 'POST' | 'DELETE', url: string, payload?: object): Promise<T> {
  const res = await app.inject({ method, url, headers, ...(payload ? { payload } : {}) })
  if (res.statusCode !== 200) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`)
  return res.json() as T
}

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now()
  const value = await work()
  return [value, performance.now() - t0]
}

const exec = (id: string, command: string) =>
  call('POST', `/v1/sandboxes/${id}/exec`, { command, sessionId: 'default' })

const f: Record<string, number[]> = {
  createToFirstResultMs: [],
  liveSnapshotMs: [],
  liveForkToFirstResultMs: [],
  imageBytes: [],
}
const made: string[] = []
try {
  for (let round = 0; round < ROUNDS; round++) {
    const [id, createMs] = await timed(async () => {
      const { id } = await call<{ id: string }>('POST', '/v1/sandboxes', {})
      await exec(id, 'true')
      return id
    })
    made.push(id)
    f.createToFirstResultMs!.push(createMs)
    await exec(id, '(i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done) & sleep 600 & true')
    const [snap, snapMs] = await timed(() =>
      call<{ id: string }>('POST', `/v1/sandboxes/${id}/snapshots`, {}),
    )
    f.liveSnapshotMs!.push(snapMs)
    const manifest = JSON.parse(
      readFileSync(join(stateDir, 'snapshots', 'manifests', `${snap.id}.json`), 'utf8'),
    ) as { live?: { files: { size: number }[] } }
    f.imageBytes!.push((manifest.live?.files ?? []).reduce((n, file) => n + file.size, 0))
    const [, forkMs] = await timed(async () => {
      const { id: child } = await call<{ id: string }>('POST', '/v1/sandboxes', { fromSnapshot: snap.id })
      made.push(child)
      await exec(child, 'true')
    })
    f.liveForkToFirstResultMs!.push(forkMs)
  }
  const reference = median(f.createToFirstResultMs!)
  const report = {
    rounds: ROUNDS,
    createToFirstResultMs: round2(reference),
    liveSnapshotMs: round2(median(f.liveSnapshotMs!)),
    liveSnapshotRatio: round2(median(f.liveSnapshotMs!) / reference),
    liveForkToFirstResultMs: round2(median(f.liveForkToFirstResultMs!)),
    liveForkRatio: round2(median(f.liveForkToFirstResultMs!) / reference),
    imageBytes: median(f.imageBytes!),
  }
  process.stdout.write(`${JSON.stringify({ bench: 'gvisor-live', ...report }, null, 2)}\n`)
} finally {
  for (const id of made) await app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers })
  await app.close()
  store.close()
  rmSync(stateDir, { recursive: true, force: true })
}
