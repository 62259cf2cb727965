import { describe, expect, it } from 'vitest'
import { lifetimeSettings } from './lifetime-settings.ts'
import { RunnerError } from './runner-error.ts'

const DEFAULTS = {
  defaultIdleTimeoutMs: 9000,
  defaultHibernateAfterMs: 3000,
  defaultSessionIdleTimeoutMs: 5000,
}

function refusal(run: () => unknown): RunnerError {
  try {
    run()
  } catch (error) {
    if (error instanceof RunnerError) return error
    throw error
  }
  throw new Error('not refused')
}

describe('lifetimeSettings with inherited settings', () => {
  it('takes the inherited settings where the request names none, and the request where it does', () => {
    const inherited = {
      snapshotId: 'snap_x',
      idleTimeoutMs: 800,
      hibernateAfterMs: 400,
      sessionIdleTimeoutMs: null,
    }
    expect(lifetimeSettings({}, DEFAULTS, true, inherited)).toEqual({
      idleTimeoutMs: 800,
      hibernateAfterMs: 400,
      sessionIdleTimeoutMs: null,
    })
    expect(
      lifetimeSettings({ sessionIdleTimeoutMs: 7 }, DEFAULTS, true, inherited).sessionIdleTimeoutMs,
    ).toBe(7)
  })

  it('refuses an inherited hibernation on a runner that keeps no snapshots, naming the snapshot', () => {
    const error = refusal(() =>
      lifetimeSettings({}, DEFAULTS, false, { snapshotId: 'snap_x', hibernateAfterMs: 400 }),
    )
    expect(error.code).toBe('BAD_REQUEST')
    expect(error.message).toContain('snap_x')
    expect(error.message).toContain('hibernateAfterMs: null')
    expect(
      lifetimeSettings({ hibernateAfterMs: null }, DEFAULTS, false, {
        snapshotId: 'snap_x',
        hibernateAfterMs: 400,
      }).hibernateAfterMs,
    ).toBeNull()
  })

  it('refuses a requested setting that conflicts with an inherited one, and keeps an inherited pair as it was', () => {
    const inherited = { snapshotId: 'snap_x', idleTimeoutMs: 800, hibernateAfterMs: 900 }
    expect(
      refusal(() => lifetimeSettings({ hibernateAfterMs: 1000 }, DEFAULTS, true, inherited)).message,
    ).toContain('idleTimeoutMs comes from snapshot snap_x')
    expect(
      refusal(() => lifetimeSettings({ idleTimeoutMs: 100 }, DEFAULTS, true, inherited)).message,
    ).toContain('hibernateAfterMs comes from snapshot snap_x')
    expect(lifetimeSettings({}, DEFAULTS, true, inherited)).toMatchObject({
      idleTimeoutMs: 800,
      hibernateAfterMs: 900,
    })
  })
})
