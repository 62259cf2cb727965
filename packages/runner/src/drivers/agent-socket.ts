// Connecting to an agent's Unix socket from the host. The socket lives in a directory only the
// runner controls (see agent-endpoint.ts), and is checked before every connect. A failed
// connect is retried with a short backoff until the deadline, as long as the sandbox is still
// alive; a dead sandbox fails at once with its reason, and a socket that is not the runner's
// fails at once too.
import type { Socket } from 'node:net'
import { connectLinkSocket } from '@conch/link'
import { RunnerError } from '../runner-error.ts'
import { withAgentSocket } from './agent-endpoint.ts'
import type { Liveness } from './sandbox-driver.ts'

/** What `connectToAgent` needs to know about the sandbox. */
export interface AgentSocketTarget {
  /** Sandbox id, for messages. */
  sandboxId: string
  /** The directory holding the agent's socket on the host. */
  socketDir: string
  /** Where the agent's log is, for messages. */
  logHint: string
  /** Whether the sandbox still runs. */
  isAlive: () => Promise<Liveness>
}

/** Connects to the agent, retrying while it starts; AGENT_UNAVAILABLE when it is gone or too slow. */
export async function connectToAgent(target: AgentSocketTarget, timeoutMs: number): Promise<Socket> {
  const deadline = Date.now() + timeoutMs
  let delay = 2
  for (;;) {
    try {
      return await withAgentSocket(target.socketDir, connectOnce)
    } catch (error) {
      if (error instanceof RunnerError) throw error
      const live = await target.isAlive()
      if (!live.alive) {
        throw new RunnerError(
          'AGENT_UNAVAILABLE',
          `the agent of sandbox ${target.sandboxId} is gone: ${live.reason}; see ${target.logHint}`,
        )
      }
      if (Date.now() >= deadline) {
        throw new RunnerError(
          'AGENT_UNAVAILABLE',
          `the agent of sandbox ${target.sandboxId} did not accept a connection within ${timeoutMs} ms; see ${target.logHint}`,
          { cause: error },
        )
      }
      await new Promise((r) => setTimeout(r, delay))
      delay = Math.min(delay * 2, 100)
    }
  }
}

function connectOnce(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    // The link reads this socket into slabs and decodes frames where they land.
    const socket = connectLinkSocket(path)
    socket.once('connect', () => {
      socket.off('error', reject)
      resolve(socket)
    })
    socket.once('error', reject)
  })
}
