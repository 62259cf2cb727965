// The agent's half of a live snapshot's quiesce (`link.suspend`): gVisor cannot checkpoint a
// sandbox while any of its sockets is bound to or connected through a host socket, and the
// runner link is exactly that (a host unix socket the agent creates in its link dir). So the
// agent lets the link go and waits, outside any socket, for the runner to hand it a secret again.
//
// Protocol, over files in the link dir (root's, 0700 on the host; the sandbox user cannot
// enter it inside): once every link socket is closed the agent writes `suspended`; the runner
// sees it, checkpoints, then writes a fresh `secret` (the same one when the sandbox goes on, a
// new one in a fork restored from the image). The agent, polling for it, reads and deletes it as
// at start, removes `suspended` and listens again. A restored image resumes inside the poll.
// The server (agent-server.ts) stops listening and calls these in order: `endLinkSockets`,
// `markSuspended`, `awaitNextSecret`.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { Socket } from 'node:net'
import { dirname, join } from 'node:path'

/** The marker the agent writes in its link dir once no link socket is open. */
export const SUSPENDED_MARKER = 'suspended'

/** How often a suspended agent looks for its next secret. */
const SECRET_POLL_MS = 20

/** How long the link sockets get to close after `end` before they are destroyed. */
const SOCKET_END_GRACE_MS = 2_000

/**
 * Ends every socket (so an answer already sent still arrives), destroys those still open after
 * a grace period, and resolves once all are closed.
 */
export async function endLinkSockets(sockets: readonly Socket[]): Promise<void> {
  const closed = sockets.map(
    (s) => new Promise((resolve) => (s.destroyed ? resolve(null) : s.once('close', resolve))),
  )
  for (const socket of sockets) socket.end()
  const force = setTimeout(() => {
    for (const socket of sockets) socket.destroy()
  }, SOCKET_END_GRACE_MS)
  await Promise.all(closed)
  clearTimeout(force)
}

/** Writes the suspended marker next to `secretFile`. */
export function markSuspended(secretFile: string): void {
  writeFileSync(join(dirname(secretFile), SUSPENDED_MARKER), '', { mode: 0o600 })
}

/**
 * Waits for `secretFile` to appear, reads and deletes it and the marker; resolves with the
 * secret when it is 64 hex digits (a malformed one is deleted and waited past).
 */
export function awaitNextSecret(secretFile: string): Promise<string> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (!existsSync(secretFile)) return
      let text = ''
      try {
        text = readFileSync(secretFile, 'utf8').trim()
      } catch {
        return
      }
      rmSync(secretFile, { force: true })
      if (!/^[0-9a-f]{64}$/.test(text)) return
      clearInterval(timer)
      rmSync(join(dirname(secretFile), SUSPENDED_MARKER), { force: true })
      resolve(text)
    }, SECRET_POLL_MS)
  })
}
