// The parallel phase: many sessions, each running commands one after another, all at once:
// throughput and latency beside as many bashes over pipes.

import { Sandbox, type Shell } from '@conch/sdk'
import { CONFIG } from '../bench-config.ts'
import type { BenchContext } from '../bench-context.ts'
import { PipeShell } from '../pipe-shell.ts'
import { inBatches, spread } from '../session-spread.ts'
import { sequential, wallTime } from '../timing.ts'

/** One round of the parallel phase. */
export async function parallelPhase(ctx: BenchContext): Promise<void> {
  const { connection, figures } = ctx
  const p = CONFIG.parallelSessions
  const c = CONFIG.parallelCommands
  const label = `${p} sessions x ${c} commands`

  const pipes = Array.from({ length: p }, () => new PipeShell())
  try {
    await Promise.all(pipes.map((ps) => ps.run('true')))
    const refSamples: number[] = []
    const refWall = await wallTime(() =>
      Promise.all(pipes.map(async (ps) => refSamples.push(...(await sequential(c, () => ps.run('true')))))),
    )
    figures.recordValue(
      'reference',
      `bash over pipes: ${label}, throughput`,
      'cmds/s',
      ((p * c) / refWall) * 1000,
    )
    figures.recordLatency('reference', `bash over pipes: ${label}, latency`, refSamples)
  } finally {
    await Promise.all(pipes.map((ps) => ps[Symbol.asyncDispose]()))
  }

  const boxes: Sandbox[] = []
  try {
    const shells: Shell[] = []
    for (const n of spread(p)) {
      const box = await Sandbox.create(connection)
      boxes.push(box)
      shells.push(...(await inBatches(n, 16, () => box.shell())))
    }
    await Promise.all(shells.map((s) => s.run('true')))
    const samples: number[] = []
    const wall = await wallTime(() =>
      Promise.all(shells.map(async (s) => samples.push(...(await sequential(c, () => s.run('true')))))),
    )
    figures.recordValue(
      'parallel',
      `${label}, throughput`,
      'cmds/s',
      ((p * c) / wall) * 1000,
      `bash over pipes: ${label}, throughput`,
    )
    figures.recordLatency('parallel', `${label}, latency`, samples, `bash over pipes: ${label}, latency`)
    for (const s of shells) s.close()
  } finally {
    await Promise.all(boxes.map((box) => box.destroy()))
  }
}
