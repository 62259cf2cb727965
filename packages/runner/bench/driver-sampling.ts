// Samples drivers side by side on one runner app (in process, through `inject`): for each
// round, one sandbox per driver in turn, so every driver sees the same machine load. Per
// sandbox: create → first result of `true`, then `runs` timed runs of `true` in its default
// session (after one untimed run that opens it).
import { performance } from 'node:perf_hooks'
import type { FastifyInstance } from 'fastify'

/** Samples in milliseconds, by driver name. */
export type DriverSamples<D extends string> = Record<D, number[]>

/** The median of `samples`, rounded to 0.01. */
export function p50(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return Math.round(sorted[Math.floor((sorted.length - 1) / 2)]! * 100) / 100
}

/**
 * Creates `sandboxes` sandboxes per driver, alternating, and times each. Every id created is
 * pushed to `ids` at once, so the caller can delete them even when a later step throws.
 */
export async function sampleDrivers<D extends string>(options: {
  app: FastifyInstance
  headers: Record<string, string>
  drivers: readonly D[]
  sandboxes: number
  runs: number
  ids: string[]
}): Promise<{ start: DriverSamples<D>; runs: DriverSamples<D> }> {
  const { app, headers, drivers } = options
  const run = async (id: string, sessionId?: string): Promise<void> => {
    const res = await app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers,
      payload: { command: 'true', ...(sessionId ? { sessionId } : {}) },
    })
    if (res.statusCode !== 200) throw new Error(`exec: ${res.statusCode} ${res.body}`)
  }
  const start = Object.fromEntries(drivers.map((d) => [d, [] as number[]])) as DriverSamples<D>
  const runs = Object.fromEntries(drivers.map((d) => [d, [] as number[]])) as DriverSamples<D>
  for (let i = 0; i < options.sandboxes; i++) {
    for (const driver of drivers) {
      const t0 = performance.now()
      const res = await app.inject({ method: 'POST', url: '/v1/sandboxes', headers, payload: { driver } })
      if (res.statusCode !== 200) throw new Error(`create ${driver}: ${res.statusCode} ${res.body}`)
      const id = (res.json() as { id: string }).id
      options.ids.push(id)
      await run(id)
      start[driver].push(performance.now() - t0)
      await run(id, 'default')
      for (let r = 0; r < options.runs; r++) {
        const t1 = performance.now()
        await run(id, 'default')
        runs[driver].push(performance.now() - t1)
      }
    }
  }
  return { start, runs }
}
