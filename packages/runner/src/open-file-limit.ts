// The process's open-file limit and the connection cap that fits under it. Every connection,
// HTTP or WebSocket, holds one file descriptor; when the runner runs out, it can no longer
// accept, open its database or reach an agent, and even /healthz stops answering. Node raises
// the soft limit to the hard limit when it starts and has no setrlimit, so the runner reads the
// limit from /proc/self/limits and keeps its connection cap below it. To allow more, raise the
// hard limit of the runner's process: `LimitNOFILE=` in a systemd unit, `--ulimit nofile=` for a
// container, `ulimit -Hn` in the shell that starts it.
import { readFileSync } from 'node:fs'

/** Descriptors kept for the runner itself (database, logs, listening socket, spare). */
const BASE_RESERVE = 64
/** Descriptors kept per sandbox (its agent link and the driver's files). */
const PER_SANDBOX_RESERVE = 8
/** The cap never goes below this, however low the limit. */
const MIN_CONNECTIONS = 16

/** The soft open-file limit in the text of /proc/self/limits, or null when it is absent or unlimited. */
export function parseOpenFileLimit(limitsText: string): number | null {
  const match = /^Max open files\s+(\d+|unlimited)\s/m.exec(limitsText)
  if (!match || match[1] === 'unlimited') return null
  return Number(match[1])
}

/** This process's soft open-file limit, or null where /proc is not there (not Linux). */
export function readOpenFileLimit(): number | null {
  try {
    return parseOpenFileLimit(readFileSync('/proc/self/limits', 'utf8'))
  } catch {
    return null
  }
}

/**
 * The connection cap to enforce: the configured one, lowered so that the connections, the
 * sandboxes' descriptors and the runner's own fit under the open-file limit.
 */
export function connectionCap(
  configured: number,
  openFileLimit: number | null,
  maxSandboxes: number,
): number {
  if (openFileLimit === null) return configured
  const room = openFileLimit - BASE_RESERVE - PER_SANDBOX_RESERVE * maxSandboxes
  return Math.max(MIN_CONNECTIONS, Math.min(configured, room))
}
