import { LIMITS } from '@conch/protocol'

// How long the client waits for a command before it stops trusting the runner: the command's
// own timeout (clamped as the runner clamps it), the kill grace periods, and slack for the
// network. Past this, a silent runner cannot hang the caller.

/** Slack on top of a command's timeout before the client gives up on the runner. */
export const DEADLINE_SLACK_MS = 10_000

/** Time after a command's timeout for the kill sequence and the network. */
export const DEFAULT_DEADLINE_GRACE_MS = LIMITS.killGraceMs * 3 + DEADLINE_SLACK_MS

/** The client-side deadline for a command with timeout `timeoutMs` (or the session default). */
export function commandDeadlineMs(
  timeoutMs: number | undefined,
  sessionDefaultMs: number | undefined,
  graceMs = DEFAULT_DEADLINE_GRACE_MS,
): number {
  const timeout = Math.max(
    timeoutMs ?? sessionDefaultMs ?? LIMITS.defaultCommandTimeoutMs,
    LIMITS.minCommandTimeoutMs,
  )
  return timeout + graceMs
}

/** Splits stdin into the wire's text and encoding. */
export function stdinFields(
  stdin: string | Uint8Array | undefined,
  encode: (bytes: Uint8Array) => string,
): { stdin?: string; stdinEncoding?: 'utf8' | 'base64' } {
  if (stdin === undefined) return {}
  if (typeof stdin === 'string') return { stdin }
  return { stdin: encode(stdin), stdinEncoding: 'base64' }
}
