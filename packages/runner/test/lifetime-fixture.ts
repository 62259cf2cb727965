// Helpers of the idle-lifetime tests: a runner that keeps snapshots on a fake clock, and the
// requests they make. A sweep moves the clock and runs one idle sweep to its end, so no test
// depends on how long a step takes.
import { expect } from 'vitest'
import { startRunner, type TestRunner, type TestRunnerOptions } from './runner-fixture.ts'

/** One minute in ms. */
export const MIN = 60_000

/** Idle settings most tests use: hibernate after 10 min, delete after 60, keep sessions. */
export const IDLE = { hibernateAfterMs: 10 * MIN, idleTimeoutMs: 60 * MIN, sessionIdleTimeoutMs: null }

/** A runner on a fake clock that keeps snapshots; `clock.now` moves only when the test says. */
export async function lifetimeRunner(
  options: TestRunnerOptions = {},
): Promise<{ runner: TestRunner; clock: { now: number }; sweep: (ms: number) => Promise<void> }> {
  const clock = { now: 1_000_000 }
  const runner = await startRunner({ listen: true, snapshots: true, now: () => clock.now, ...options })
  return {
    runner,
    clock,
    /** Moves the clock by `ms`, then runs one idle sweep to its end. */
    sweep: async (ms) => {
      clock.now += ms
      await runner.app.conch.manager.lifetimes.sweep()
    },
  }
}

/** Creates a sandbox with `payload`; returns its id. */
export async function create(runner: TestRunner, payload: object): Promise<string> {
  const res = await runner.app.inject({ method: 'POST', url: '/v1/sandboxes', headers: runner.auth, payload })
  expect(res.statusCode, res.body).toBe(200)
  return (res.json() as { id: string }).id
}

/** A sandbox's info through the API (the request counts as activity). */
export async function info(runner: TestRunner, id: string): Promise<Record<string, unknown>> {
  const res = await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })
  expect(res.statusCode, res.body).toBe(200)
  return res.json() as Record<string, unknown>
}

/** The status as the manager holds it, without a request (a request counts as activity). */
export function status(runner: TestRunner, id: string): string | undefined {
  return runner.app.conch.manager.list().find((s) => s.id === id)?.record.status
}

/** Runs `command` in the default session through REST. */
export async function exec(runner: TestRunner, id: string, command: string, headers = runner.auth) {
  return runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/exec`,
    headers,
    payload: { command, sessionId: 'default' },
  })
}

/** A fresh token of sandbox `id`, as headers. */
export async function token(runner: TestRunner, id: string): Promise<{ authorization: string }> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/tokens`,
    headers: runner.auth,
    payload: {},
  })
  return { authorization: `Bearer ${(res.json() as { token: string }).token}` }
}
