// The streaming phase: `head -c N /dev/zero` through `shell.stream` beside bash over pipes and
// the bare two-hop: throughput, each process's CPU per MiB, and the runner's and the agent's
// RSS before and at their peak while streaming (the bare relay's beside the runner's).
// The SDK client and the bash-over-pipes reader each stream in a fresh Node process of their
// own, after the same warm-up stream (stream-client-process.ts, pipe-shell-process.ts): each
// reader's heap then holds only its own garbage (see stream-client-process.ts for what the
// bench's own process did to the figure).

import { CONFIG, MB } from '../bench-config.ts'
import type { BenchContext } from '../bench-context.ts'
import { PipeShellChild } from '../pipe-shell-child.ts'
import { cpuMs } from '../proc-cpu.ts'
import {
  peakRssBytes,
  RssSampler,
  resetPeak,
  rssAnonBytes,
  rssBytes,
  sandboxProcesses,
} from '../proc-memory.ts'
import { StreamClientChild } from '../stream-client-child.ts'
import { wallTime } from '../timing.ts'

/** Most bytes of the stream each reader runs once before it is measured. */
const WARMUP_BYTES = 16 * 1024 ** 2

/** One round of the streaming phase. */
export async function streamingPhase(ctx: BenchContext): Promise<void> {
  const { runner, sb, bare, figures } = ctx
  const bytes = CONFIG.streamBytes
  const size =
    bytes % 1024 ** 3 === 0
      ? `${bytes / 1024 ** 3}G`
      : bytes % 1024 ** 2 === 0
        ? `${bytes / 1024 ** 2}M`
        : `${bytes}`
  const label = `head -c ${size} /dev/zero`
  const warmupBytes = Math.min(bytes, WARMUP_BYTES)
  await using client = new StreamClientChild({
    url: runner.url,
    apiKey: runner.apiKey,
    sandboxId: sb.id,
    bytes,
    warmupBytes,
  })
  await using pipe = new PipeShellChild()
  await Promise.all([client.ready, pipe.ready])
  await pipe.stream(warmupBytes)
  const ref = await pipe.stream(bytes)
  figures.recordValue('reference', `bash over pipes: ${label}`, 'MB/s', ref.bytes / MB / (ref.ms / 1000))

  // The bare two-hop's relay is a bare Node holding a WebSocket: the runner's memory reference.
  figures.recordValue('reference', 'bare two-hop relay RSS, idle', 'MB', rssBytes(bare.relayPid) / MB)
  // RSS also counts the Node binary's file pages, which every Node process shares and whose
  // mapped size moves with the host's kernel (an idle bare Node 24: 44 and 73 MB on two
  // machines, 8 MB of it anonymous on both); the anonymous part is the process's own memory.
  figures.recordValue(
    'reference',
    'bare two-hop relay anonymous memory, idle',
    'MB',
    rssAnonBytes(bare.relayPid) / MB,
  )
  const relayPeakResettable = resetPeak(bare.relayPid)
  const relaySampler = new RssSampler([bare.relayPid])
  const bareBefore = bare.bytesOut
  const bareMs = await wallTime(() => bare.run(`head -c ${bytes} /dev/zero`))
  const relaySampled = relaySampler.stop()
  figures.recordValue(
    'reference',
    `bare two-hop: ${label}`,
    'MB/s',
    (bare.bytesOut - bareBefore) / MB / (bareMs / 1000),
  )
  figures.recordValue(
    'reference',
    'bare two-hop relay peak RSS while streaming',
    'MB',
    Math.max(relaySampled.get(bare.relayPid) ?? 0, relayPeakResettable ? peakRssBytes(bare.relayPid) : 0) /
      MB,
  )

  const { agent } = sandboxProcesses(runner.sweepTarget, runner.pid, sb.id)
  figures.recordValue(
    'streaming',
    'runner RSS before streaming',
    'MB',
    rssBytes(runner.pid) / MB,
    'bare two-hop relay RSS, idle',
  )
  figures.setGoal('runner RSS before streaming', { bound: 'max', of: 'value', limit: 100 })
  figures.recordValue(
    'streaming',
    'runner anonymous memory before streaming',
    'MB',
    rssAnonBytes(runner.pid) / MB,
    'bare two-hop relay anonymous memory, idle',
  )
  figures.recordValue('streaming', 'agent RSS before streaming', 'MB', rssBytes(agent) / MB)
  const peaksResettable = resetPeak(runner.pid) && resetPeak(agent)
  const sampler = new RssSampler([runner.pid, agent])
  const cpuBefore = { runner: cpuMs(runner.pid), agent: cpuMs(agent) }
  const streamed = await client.stream()
  const sampled = sampler.stop()
  const mib = bytes / 1024 ** 2
  figures.recordValue(
    'streaming',
    'runner CPU per MiB streamed',
    'ms',
    (cpuMs(runner.pid) - cpuBefore.runner) / mib,
  )
  figures.recordValue('streaming', 'agent CPU per MiB streamed', 'ms', (cpuMs(agent) - cpuBefore.agent) / mib)
  figures.recordValue('streaming', 'client (SDK) CPU per MiB streamed', 'ms', streamed.cpuMs / mib)
  figures.recordValue(
    'streaming',
    `${label} through shell.stream`,
    'MB/s',
    streamed.bytes / MB / (streamed.ms / 1000),
    `bash over pipes: ${label}`,
  )
  figures.setGoal(`${label} through shell.stream`, { bound: 'min', of: 'ratio', limit: 0.5 })
  // The same stream beside a bare relay over the same two hops: what conch's checks, framing
  // and scrollback cost apart from the hops themselves, which the bare two-hop pays as well.
  figures.recordValue(
    'streaming',
    `${label} through shell.stream, beside the bare two-hop`,
    'MB/s',
    streamed.bytes / MB / (streamed.ms / 1000),
    `bare two-hop: ${label}`,
  )
  const peak = (pid: number): number =>
    Math.max(sampled.get(pid) ?? 0, peaksResettable ? peakRssBytes(pid) : 0) / MB
  figures.recordValue(
    'streaming',
    'runner peak RSS while streaming',
    'MB',
    peak(runner.pid),
    'bare two-hop relay peak RSS while streaming',
  )
  figures.setGoal('runner peak RSS while streaming', { bound: 'max', of: 'value', limit: 150 })
  figures.recordValue('streaming', 'agent peak RSS while streaming', 'MB', peak(agent))
}
