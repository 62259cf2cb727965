// Connecting to an agent's Unix socket from the host. Right after a start the agent may not
// listen yet, so a failed connect is retried with a short backoff until the deadline, as long
// as the sandbox is still alive; a dead sandbox fails at once with its reason.
import { connect as netConnect, type Socket } from 'node:net'
import { RunnerError } from '../runner-error.ts'
import type { Liveness } from './sandbox-driver.ts'

/** What `connectToAgent` needs to know about the sandbox. */
export interface AgentSocketTarget {
  /** Sandbox id, for messages. */
  sandboxId: string
  /** The agent's socket path on the host. */
  socketPath: string
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
      return await connectOnce(target.socketPath)
    } catch (error) {
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
    const socket = netConnect(path)
    socket.once('connect', () => {
      socket.off('error', reject)
      resolve(socket)
    })
    socket.once('error', reject)
  })
}
