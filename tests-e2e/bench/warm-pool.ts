// The runner's warm pool as the startup phase sees it, through the runner's metrics.

import { WARM_POOL } from './bench-config.ts'

/** A warm-pool figure from the runner's metrics, for `driver`; 0 when absent. */
export async function poolMetric(
  runner: { url: string; apiKey: string },
  name: string,
  driver: string,
): Promise<number> {
  const res = await fetch(`${runner.url}/metrics`, { headers: { authorization: `Bearer ${runner.apiKey}` } })
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name}{driver="${driver}"}`))
  return line === undefined ? 0 : Number(line.split(' ').at(-1))
}

/** Waits until the runner's warm pool for `driver` is full (no refill under way). */
export async function poolFull(runner: { url: string; apiKey: string }, driver: string): Promise<void> {
  const until = Date.now() + 60_000
  while ((await poolMetric(runner, 'conch_warm_pool_ready', driver)) < WARM_POOL) {
    if (Date.now() > until) throw new Error(`the warm pool of ${driver} did not fill within 60 s`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
