// A sandbox's idle settings: what its create request asked for, else the runner's defaults.
// Three idle times, each measured from the sandbox's last activity (a request, or a client, run
// or keep-alive letting go): `hibernateAfterMs` snapshots and stops it, `idleTimeoutMs` deletes
// it (so it should be the longer one), and `sessionIdleTimeoutMs` deletes one of its sessions.
import type { CreateSandboxRequest } from '@conch/protocol'
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'

/** The idle settings stored with a sandbox; null means never. */
export interface LifetimeSettings {
  /** Idle time after which it is deleted. */
  idleTimeoutMs: number | null
  /** Idle time after which it hibernates. */
  hibernateAfterMs: number | null
  /** Idle time after which one of its sessions (not the default) is deleted. */
  sessionIdleTimeoutMs: number | null
}

/** A requested setting (`null` for never), else the runner's default (0 there: never). */
function orDefault(requested: number | null | undefined, runnerDefault: number): number | null {
  if (requested !== undefined) return requested
  return runnerDefault === 0 ? null : runnerDefault
}

/**
 * The idle settings of a new sandbox. `canHibernate` is false on a runner without a snapshot
 * store: it never hibernates, and a request that asks for hibernation is refused. BAD_REQUEST
 * when the request asks to hibernate no sooner than it would be deleted.
 */
export function lifetimeSettings(
  request: Pick<CreateSandboxRequest, 'idleTimeoutMs' | 'hibernateAfterMs' | 'sessionIdleTimeoutMs'>,
  limits: Pick<
    RunnerLimits,
    'defaultIdleTimeoutMs' | 'defaultHibernateAfterMs' | 'defaultSessionIdleTimeoutMs'
  >,
  canHibernate: boolean,
): LifetimeSettings {
  const { idleTimeoutMs, hibernateAfterMs } = request
  if (typeof hibernateAfterMs === 'number' && !canHibernate) {
    throw new RunnerError(
      'BAD_REQUEST',
      'this runner keeps no snapshots, so it cannot hibernate sandboxes; drop hibernateAfterMs (or pass null), or use a runner started with `conch runner`',
      {
        details: { issues: [{ path: ['hibernateAfterMs'], message: 'needs a runner that keeps snapshots' }] },
      },
    )
  }
  if (
    typeof hibernateAfterMs === 'number' &&
    typeof idleTimeoutMs === 'number' &&
    hibernateAfterMs >= idleTimeoutMs
  ) {
    throw new RunnerError(
      'BAD_REQUEST',
      `hibernateAfterMs (${hibernateAfterMs}) must be shorter than idleTimeoutMs (${idleTimeoutMs}): a sandbox hibernates first and is deleted later`,
      {
        details: {
          issues: [
            { path: ['hibernateAfterMs'], message: `must be less than idleTimeoutMs (${idleTimeoutMs})` },
          ],
        },
      },
    )
  }
  return {
    idleTimeoutMs: orDefault(idleTimeoutMs, limits.defaultIdleTimeoutMs),
    hibernateAfterMs: canHibernate ? orDefault(hibernateAfterMs, limits.defaultHibernateAfterMs) : null,
    sessionIdleTimeoutMs: orDefault(request.sessionIdleTimeoutMs, limits.defaultSessionIdleTimeoutMs),
  }
}
