// The latency phase: sequential `shell.run` and `sb.exec` of 'true' and 'echo hi', each right
// after its references (the bare two-hop, bash over pipes, a fresh `bash -c`), and for 'true'
// each process's CPU and wakeups per run beside the bare two-hop's.

import { spawn } from 'node:child_process'
import { CONFIG } from '../bench-config.ts'
import type { BenchContext } from '../bench-context.ts'
import { childPids, perRunShares } from '../per-run-cost.ts'
import { sandboxProcesses } from '../proc-memory.ts'
import { sequential } from '../timing.ts'

/** A fresh `bash -c` from Node: the floor of any per-command process spawn. */
function spawnBash(command: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.resume()
    child.stderr.resume()
    child.once('error', reject)
    child.once('close', () => resolve())
  })
}

/**
 * Each process's CPU and wakeups per sequential `run('true')`, the product's beside the bare
 * two-hop's counterpart (per-run-cost.ts): which hop a latency ratio comes from.
 */
async function recordRunShares(ctx: BenchContext): Promise<void> {
  const { runner, sb, sh, bare, figures } = ctx
  const runs = CONFIG.sequentialRuns
  const bareShares = await perRunShares(
    {
      client: [process.pid],
      relay: [bare.relayPid],
      holder: [bare.holderPid],
      bash: childPids(bare.holderPid),
    },
    runs,
    () => bare.run('true'),
  )
  const { agent, bashes } = sandboxProcesses(runner.sweepTarget, runner.pid, sb.id)
  const shares = await perRunShares(
    { client: [process.pid], runner: [runner.pid], agent: [agent], bash: bashes },
    runs,
    () => sh.run('true'),
  )
  const pairs = [
    ['client (SDK)', shares.client, 'bare two-hop client', bareShares.client],
    ['runner', shares.runner, 'bare two-hop relay', bareShares.relay],
    ['agent', shares.agent, 'bare two-hop holder', bareShares.holder],
    ["the session's bash", shares.bash, "bare two-hop's bash", bareShares.bash],
  ] as const
  for (const [name, share, refName, ref] of pairs) {
    const cpuRef = `${refName}: CPU per run('true')`
    figures.recordValue('reference', cpuRef, 'µs', ref.cpuUs)
    figures.recordValue('per-run', `${name}: CPU per run('true')`, 'µs', share.cpuUs, cpuRef)
    const wakeRef = `${refName}: wakeups per run('true')`
    figures.recordValue('reference', wakeRef, 'count', ref.wakeups)
    figures.recordValue('per-run', `${name}: wakeups per run('true')`, 'count', share.wakeups, wakeRef)
  }
}

/** One round of the latency phase. */
export async function latencyPhase(ctx: BenchContext): Promise<void> {
  const { sb, sh, pipe, bare, figures } = ctx
  for (const command of ['true', 'echo hi']) {
    await sequential(CONFIG.warmupRuns, () => bare.run(command))
    await sequential(CONFIG.warmupRuns, () => pipe.run(command))
    await sequential(CONFIG.warmupRuns, () => sh.run(command))
    await sequential(Math.ceil(CONFIG.warmupRuns / 10), () => sb.exec(command))

    const twoHop = `bare two-hop: ${command}`
    figures.recordLatency(
      'reference',
      twoHop,
      await sequential(CONFIG.sequentialRuns, () => bare.run(command)),
    )
    const ref = `bash over pipes: ${command}`
    figures.recordLatency('reference', ref, await sequential(CONFIG.sequentialRuns, () => pipe.run(command)))
    const shellSamples = await sequential(CONFIG.sequentialRuns, () => sh.run(command))
    const shell = figures.recordLatency('latency', `shell.run('${command}')`, shellSamples, ref)
    if (command === 'true') {
      const name = `shell.run('${command}') vs bare two-hop`
      figures.recordLatency('goals', name, shellSamples, twoHop)
      figures.setGoal(name, { bound: 'max', of: 'ratio', limit: 1 })
      await recordRunShares(ctx)
    }
    figures.recordLatency(
      'reference',
      `fresh bash -c from Node: ${command}`,
      await sequential(CONFIG.execRuns, () => spawnBash(command)),
    )
    const exec = figures.recordLatency(
      'latency',
      `sb.exec('${command}')`,
      await sequential(CONFIG.execRuns, () => sb.exec(command)),
      ref,
    )
    figures.recordValue('latency', `exec/shell p50 ratio ('${command}')`, 'x', exec.p50 / shell.p50)
  }
}
