// A sandbox's idle settings: what its create request asked for, else (for a fork) what the
// snapshot's sandbox had, else the runner's defaults. Three idle times, each measured from the
// sandbox's last activity (a request, or a client, run or keep-alive letting go):
// `hibernateAfterMs` snapshots and stops it, `idleTimeoutMs` deletes it (so it should be the
// longer one), and `sessionIdleTimeoutMs` deletes one of its sessions. A value inherited from a
// snapshot meets the same checks as a requested one, and a refusal names the snapshot.
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

/** Idle settings a fork inherits from its snapshot; an absent one falls to the runner's default. */
export interface InheritedLifetimes {
  /** The snapshot the settings come from (named in refusals). */
  snapshotId: string
  /** Its sandbox's idle timeout, if the snapshot recorded one. */
  idleTimeoutMs?: number | null
  /** Its sandbox's hibernation time, if recorded. */
  hibernateAfterMs?: number | null
  /** Its sandbox's session idle timeout, if recorded. */
  sessionIdleTimeoutMs?: number | null
}

/** A setting (`null` for never), else the runner's default (0 there: never). */
function orDefault(named: number | null | undefined, runnerDefault: number): number | null {
  if (named !== undefined) return named
  return runnerDefault === 0 ? null : runnerDefault
}

function refuse(field: 'hibernateAfterMs', message: string, issue: string): RunnerError {
  return new RunnerError('BAD_REQUEST', message, {
    details: { issues: [{ path: [field], message: issue }] },
  })
}

/**
 * The idle settings of a new sandbox. `canHibernate` is false on a runner without a snapshot
 * store: it never hibernates, and a request (or a fork's snapshot) that asks for hibernation is
 * refused. BAD_REQUEST when the request asks to hibernate no sooner than it would be deleted,
 * or when a setting it names conflicts that way with one a fork inherits. `inherited` are the
 * snapshot's settings, used where the request names none.
 */
export function lifetimeSettings(
  request: Pick<CreateSandboxRequest, 'idleTimeoutMs' | 'hibernateAfterMs' | 'sessionIdleTimeoutMs'>,
  limits: Pick<
    RunnerLimits,
    'defaultIdleTimeoutMs' | 'defaultHibernateAfterMs' | 'defaultSessionIdleTimeoutMs'
  >,
  canHibernate: boolean,
  inherited?: InheritedLifetimes,
): LifetimeSettings {
  const idleInherited = request.idleTimeoutMs === undefined && inherited?.idleTimeoutMs !== undefined
  const hibernateInherited =
    request.hibernateAfterMs === undefined && inherited?.hibernateAfterMs !== undefined
  const idleTimeoutMs = idleInherited ? inherited?.idleTimeoutMs : request.idleTimeoutMs
  const hibernateAfterMs = hibernateInherited ? inherited?.hibernateAfterMs : request.hibernateAfterMs
  const sessionIdleTimeoutMs =
    request.sessionIdleTimeoutMs === undefined
      ? inherited?.sessionIdleTimeoutMs
      : request.sessionIdleTimeoutMs
  const from = `snapshot ${inherited?.snapshotId}`
  if (typeof hibernateAfterMs === 'number' && !canHibernate) {
    throw refuse(
      'hibernateAfterMs',
      hibernateInherited
        ? `${from} was taken of a sandbox that hibernates after ${hibernateAfterMs} ms, and this runner keeps no snapshots, so it cannot hibernate sandboxes; pass hibernateAfterMs: null to fork it without hibernation`
        : 'this runner keeps no snapshots, so it cannot hibernate sandboxes; drop hibernateAfterMs (or pass null), or use a runner started with `conch runner`',
      'needs a runner that keeps snapshots',
    )
  }
  if (
    typeof hibernateAfterMs === 'number' &&
    typeof idleTimeoutMs === 'number' &&
    hibernateAfterMs >= idleTimeoutMs &&
    // Both from the snapshot: the settings its sandbox ran with, kept as they were.
    !(idleInherited && hibernateInherited)
  ) {
    const source = hibernateInherited
      ? ` (hibernateAfterMs comes from ${from}; pass your own hibernateAfterMs, or null)`
      : idleInherited
        ? ` (idleTimeoutMs comes from ${from}; pass your own idleTimeoutMs, or null)`
        : ''
    throw refuse(
      'hibernateAfterMs',
      `hibernateAfterMs (${hibernateAfterMs}) must be shorter than idleTimeoutMs (${idleTimeoutMs}): a sandbox hibernates first and is deleted later${source}`,
      `must be less than idleTimeoutMs (${idleTimeoutMs})`,
    )
  }
  return {
    idleTimeoutMs: orDefault(idleTimeoutMs, limits.defaultIdleTimeoutMs),
    hibernateAfterMs: canHibernate ? orDefault(hibernateAfterMs, limits.defaultHibernateAfterMs) : null,
    sessionIdleTimeoutMs: orDefault(sessionIdleTimeoutMs, limits.defaultSessionIdleTimeoutMs),
  }
}
