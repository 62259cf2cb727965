// The startup phase: sandbox create to the first `shell.run` result, cold (an env the warm
// pool does not hold) and warm (taken from the pool), beside bash over pipes' spawn and the
// bare two-hop's start.

import { Sandbox } from '@conch/sdk'
import { BareTwoHop } from '../bare-two-hop.ts'
import { CONFIG } from '../bench-config.ts'
import { assertExit, type BenchContext } from '../bench-context.ts'
import { PipeShell } from '../pipe-shell.ts'
import { wallTime } from '../timing.ts'
import { poolFull, poolMetric } from '../warm-pool.ts'

/** One round of the startup phase. */
export async function startupPhase(ctx: BenchContext): Promise<void> {
  const { runner, sb, connection, figures } = ctx
  const runs = Math.max(1, Math.round(CONFIG.startupRounds / CONFIG.rounds))
  const driver = sb.info.driver
  for (let i = 0; i < runs; i++) {
    let fresh: PipeShell | undefined
    const refMs = await wallTime(async () => {
      fresh = new PipeShell()
      await fresh.run('true')
    })
    await fresh?.[Symbol.asyncDispose]()
    figures.recordValue('reference', 'bash over pipes: spawn to first result', 'ms', refMs)

    let twoHop: BareTwoHop | undefined
    const twoHopMs = await wallTime(async () => {
      twoHop = await BareTwoHop.start()
    })
    await twoHop?.[Symbol.asyncDispose]()
    figures.recordValue('reference', 'bare two-hop: start to first result', 'ms', twoHopMs)

    // Cold: the sandbox env (the sweep marker) is one the warm pool does not hold. The pool is
    // full first, so no refill competes with the measurement.
    await poolFull(runner, driver)
    let box: Sandbox | undefined
    const ms = await wallTime(async () => {
      box = await Sandbox.create(connection)
      const first = await box.shell()
      assertExit(await first.run('true'), 'first run')
    })
    await box?.destroy()
    figures.recordValue(
      'startup',
      'sandbox create to first shell.run result',
      'ms',
      ms,
      'bash over pipes: spawn to first result',
    )
    const cold = 'sandbox create (cold) to first shell.run result vs bare two-hop start'
    figures.recordValue('goals', cold, 'ms', ms, 'bare two-hop: start to first result')
    figures.setGoal(cold, { bound: 'max', of: 'value', limit: 100 })

    // Warm: default options, taken from the pool.
    await poolFull(runner, driver)
    const hits = await poolMetric(runner, 'conch_warm_pool_hits_total', driver)
    let pooled: Sandbox | undefined
    let createMs = 0
    const warmMs = await wallTime(async () => {
      createMs = await wallTime(async () => {
        pooled = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
      })
      const first = await pooled!.shell()
      assertExit(await first.run('true'), 'first run')
    })
    // The create request alone, and the rest (the shell socket, its attach, the first run).
    figures.recordValue('startup', 'warm pool: the create request alone', 'ms', createMs)
    figures.recordValue('startup', 'warm pool: shell() and the first run after it', 'ms', warmMs - createMs)
    await pooled?.destroy()
    if ((await poolMetric(runner, 'conch_warm_pool_hits_total', driver)) !== hits + 1)
      throw new Error('the warm-pool create was not served from the pool')
    const warm = 'sandbox create (warm pool) to first shell.run result vs bare two-hop start'
    figures.recordValue('goals', warm, 'ms', warmMs, 'bare two-hop: start to first result')
    figures.setGoal(warm, { bound: 'max', of: 'value', limit: 20 })
  }
}
