// The memory phase: what an idle session costs the runner, the agent and its bash, measured
// over many new sessions, beside a bare bash's RSS and PSS.

import { Sandbox } from '@conch/sdk'
import { CONFIG, KB } from '../bench-config.ts'
import { assertExit, type BenchContext } from '../bench-context.ts'
import { pssBytes, rssBytes, sandboxProcesses } from '../proc-memory.ts'
import { inBatches, spread } from '../session-spread.ts'

/** One round of the memory phase. */
export async function memoryPhase(ctx: BenchContext): Promise<void> {
  const { runner, connection, pipe, figures } = ctx
  const k = CONFIG.idleSessions
  const bareBash = rssBytes(pipe.pid)
  figures.recordValue('reference', 'bare bash RSS', 'KB', bareBash / KB)
  figures.recordValue('reference', 'bare bash PSS', 'KB', pssBytes(pipe.pid) / KB)

  const plan = spread(k)
  const boxes: Sandbox[] = []
  try {
    for (const _ of plan) {
      const box = await Sandbox.create(connection)
      boxes.push(box)
      assertExit(await box.exec('true', { sessionId: 'default' }), 'default session')
    }
    const starts = boxes.map((box) => sandboxProcesses(runner.sweepTarget, runner.pid, box.id))
    const runnerBefore = rssBytes(runner.pid)
    const agentsBefore = starts.map((start) => rssBytes(start.agent))
    for (const [i, box] of boxes.entries()) await inBatches(plan[i]!, 16, () => box.createSession())
    const runnerDelta = (rssBytes(runner.pid) - runnerBefore) / k
    let agentGrowth = 0
    const added: number[] = []
    for (const [i, box] of boxes.entries()) {
      const after = sandboxProcesses(runner.sweepTarget, runner.pid, box.id)
      agentGrowth += rssBytes(after.agent) - agentsBefore[i]!
      added.push(...after.bashes.filter((pid) => !starts[i]!.bashes.includes(pid)))
    }
    if (added.length < k) throw new Error(`expected ${k} new bash processes, found ${added.length}`)
    const agentDelta = agentGrowth / k
    const bashRss = added.reduce((sum, pid) => sum + rssBytes(pid), 0) / added.length
    const bashPss = added.reduce((sum, pid) => sum + pssBytes(pid), 0) / added.length
    const sessions = `${k} sessions over ${boxes.length} sandboxes`
    figures.recordValue(
      'memory',
      `idle session: runner RSS per session (${sessions})`,
      'KB',
      runnerDelta / KB,
      'bare bash RSS',
    )
    figures.recordValue(
      'memory',
      `idle session: agent RSS per session (${sessions})`,
      'KB',
      agentDelta / KB,
      'bare bash RSS',
    )
    figures.recordValue(
      'memory',
      'idle session: overhead beyond bash (runner + agent)',
      'KB',
      (runnerDelta + agentDelta) / KB,
      'bare bash RSS',
    )
    figures.recordValue('memory', 'idle session: bash RSS', 'KB', bashRss / KB, 'bare bash RSS')
    figures.recordValue('memory', 'idle session: bash PSS', 'KB', bashPss / KB, 'bare bash PSS')
  } finally {
    await Promise.all(boxes.map((box) => box.destroy()))
  }
}
