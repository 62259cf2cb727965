// The pipelining phase: many `shell.run('true')` in flight on one shell at once, as wall time
// and throughput beside bash over pipes, and the largest batch beside the bare two-hop.

import { CONFIG } from '../bench-config.ts'
import type { BenchContext } from '../bench-context.ts'
import { wallTime } from '../timing.ts'

/** One round of the pipelining phase. */
export async function pipeliningPhase(ctx: BenchContext): Promise<void> {
  const { sh, pipe, bare, figures } = ctx
  const max = Math.max(...CONFIG.pipelined)
  const twoHopRate = `bare two-hop: ${max} pipelined, throughput`
  const twoHopWall = await wallTime(() => Promise.all(Array.from({ length: max }, () => bare.run('true'))))
  figures.recordValue('reference', twoHopRate, 'cmds/s', (max / twoHopWall) * 1000)
  const goalWall = await wallTime(() => Promise.all(Array.from({ length: max }, () => sh.run('true'))))
  const goalName = `${max} pipelined shell.run('true') on one shell vs bare two-hop, throughput`
  figures.recordValue('goals', goalName, 'cmds/s', (max / goalWall) * 1000, twoHopRate)
  figures.setGoal(goalName, { bound: 'min', of: 'ratio', limit: 0.8 })
  for (const n of CONFIG.pipelined) {
    const refWall = `bash over pipes: ${n} pipelined, wall`
    const refRate = `bash over pipes: ${n} pipelined, throughput`
    const pipeWall = await wallTime(() => Promise.all(Array.from({ length: n }, () => pipe.run('true'))))
    figures.recordValue('reference', refWall, 'ms', pipeWall)
    figures.recordValue('reference', refRate, 'cmds/s', (n / pipeWall) * 1000)
    const shellWall = await wallTime(() => Promise.all(Array.from({ length: n }, () => sh.run('true'))))
    figures.recordValue('pipelining', `${n} pipelined shell.run('true'), wall`, 'ms', shellWall, refWall)
    figures.recordValue(
      'pipelining',
      `${n} pipelined shell.run('true'), throughput`,
      'cmds/s',
      (n / shellWall) * 1000,
      refRate,
    )
  }
}
