// `pnpm bench:first-run`: where a new shell's first result spends its time, through the real
// runner and SDK. For a fresh sandbox and for a second session of a sandbox in use: the session
// create (POST), the socket (GET + WebSocket + attach), run 1, run 2 right after it, and run 3
// after the same idle pause that came before the create. Run 3 is what an idle shell costs
// anyway, so run 1 over run 3 is the first run's own cost. A cold sandbox (with env, which the
// warm pool does not hold) is split too: its create (POST), `shell()` (socket, attach, the spare
// shell taken) and run 1, back to back as a client does them. `FIRST_RUN_ROUNDS` sets the rounds
// (default 5); rows print the median, then each round's value, in ms.
import { performance } from 'node:perf_hooks'
import { Sandbox } from '@conch/sdk'
import { startRunner } from '../harness/runner-process.ts'
import { median } from './stats.ts'

const ROUNDS = Number(process.env.FIRST_RUN_ROUNDS ?? 5)
const PAUSE_MS = 100
const pause = () => new Promise((resolve) => setTimeout(resolve, PAUSE_MS))

await using runner = await startRunner({ args: ['--log-level', 'warn', '--warm-pool', '1'] })
const connection = { url: runner.url, apiKey: runner.apiKey, env: { ...runner.sandboxEnv } }
const inUse = await Sandbox.create(connection)
await (await inUse.shell()).run('true')
const rows = new Map<string, number[]>()
const record = (name: string, ms: number): void => {
  rows.set(name, [...(rows.get(name) ?? []), ms])
}
for (let round = 0; round < ROUNDS; round++) {
  await pause()
  const c0 = performance.now()
  const cold = await Sandbox.create({ ...connection, env: { ...connection.env, CONCH_BENCH_COLD: '1' } })
  const c1 = performance.now()
  const coldShell = await cold.shell()
  const c2 = performance.now()
  await coldShell.run('true')
  const c3 = performance.now()
  record('cold sandbox: create (POST)', c1 - c0)
  record('cold sandbox: shell()', c2 - c1)
  record('cold sandbox: run 1', c3 - c2)
  record('cold sandbox: create to first result', c3 - c0)
  coldShell.close()
  await cold.destroy()
  for (const kind of ['fresh sandbox', 'sandbox in use'] as const) {
    const sb = kind === 'fresh sandbox' ? await Sandbox.create(connection) : inUse
    await pause()
    const t0 = performance.now()
    const session = await sb.createSession({})
    const t1 = performance.now()
    const sh = await sb.reattachShell(session.id)
    const t2 = performance.now()
    await sh.run('true')
    const t3 = performance.now()
    await sh.run('true')
    const t4 = performance.now()
    await pause()
    const t5 = performance.now()
    await sh.run('true')
    const t6 = performance.now()
    record(`${kind}: create session (POST)`, t1 - t0)
    record(`${kind}: socket open`, t2 - t1)
    record(`${kind}: run 1`, t3 - t2)
    record(`${kind}: run 2 (right after)`, t4 - t3)
    record(`${kind}: run 3 (after a pause)`, t6 - t5)
    sh.close()
    await session.delete().catch(() => {})
    if (kind === 'fresh sandbox') await sb.destroy()
  }
}
for (const [name, values] of rows)
  console.log(
    name.padEnd(40),
    median(values).toFixed(2).padStart(7),
    values.map((v) => v.toFixed(1)).join(' '),
  )
await inUse.destroy()
// A stopped runner destroys its warm pool (a killed one would leave its disk mounted).
await runner.kill('SIGTERM')
