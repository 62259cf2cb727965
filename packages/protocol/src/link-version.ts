// The version of the runner↔agent link, separate from PROTOCOL_VERSION (which versions what
// clients see: the WebSocket and REST). Agents outlive their runner, so a runner upgraded across a
// link change meets agents that speak the link it replaced; it reads their version from their
// hello and reports the sandbox dead with the reason instead of retrying a link it cannot speak.
//
// What every link version keeps, so two versions can name each other: the framing
// (`@conch/link`'s length-prefixed JSON header), and a hello that the runner sends first and the
// agent answers, carrying `linkVersion` (link 1 had none: it was discriminated on `t`).

/**
 * The link version this build speaks; both hellos carry it. Link 1 (discriminated on `t`, with
 * `run_start`/`run_exit`/`replay_end`/`closed` frames) is no longer spoken.
 */
export const LINK_VERSION = 2

/** Every frame name of link 1, whose frames were discriminated on `t`. */
const LINK_1_TYPES: ReadonlySet<string> = new Set([
  'hello',
  'auth',
  'call',
  'credit',
  'close',
  'data',
  'end',
  'ping',
  'pong',
  'result',
  'fail',
  'run_start',
  'run_exit',
  'replay_end',
  'closed',
  'error',
  'session_closed',
])

/**
 * The link version a frame header shows, or null when it shows none: 1 for a frame of link 1
 * (a `t` naming one of its frames and no `type`), a hello's `linkVersion` from link 2 on, null
 * for anything else (garbage, or a frame that carries no version).
 */
export function linkVersionOf(header: unknown): number | null {
  if (typeof header !== 'object' || header === null || Array.isArray(header)) return null
  const { t, type, linkVersion } = header as Record<string, unknown>
  if (type === undefined && typeof t === 'string' && LINK_1_TYPES.has(t)) return 1
  if (type === 'hello' && Number.isSafeInteger(linkVersion) && (linkVersion as number) > 0) {
    return linkVersion as number
  }
  return null
}

/** True when a frame header is a hello of some link version (`t` on link 1, `type` after it). */
export function isLinkHello(header: unknown): boolean {
  if (typeof header !== 'object' || header === null) return false
  const { t, type } = header as Record<string, unknown>
  return type === 'hello' || (type === undefined && t === 'hello')
}
