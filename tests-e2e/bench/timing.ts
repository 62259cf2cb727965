// Timing a workload: the latency of each of N sequential calls, or the wall time of one.

import { performance } from 'node:perf_hooks'

/** Calls `fn` `runs` times, one after another; each call's latency in ms. */
export async function sequential(runs: number, fn: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    await fn()
    samples.push(performance.now() - t0)
  }
  return samples
}

/** The wall time of `fn` in ms. */
export async function wallTime(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now()
  await fn()
  return performance.now() - t0
}
