import type { CallAnswer } from '@conch/link'
import type { AgentFrame, AgentMethod, AgentParams, AgentResultOf } from '@conch/protocol'
import type { AgentChannel } from './agent-channel.ts'

/** The `session.*` methods of the agent protocol. */
export type SessionMethod = Extract<AgentMethod, `session.${string}`>

/** What a method handler gets from the link it was called on. */
export interface MethodContext {
  /** Opens (or returns) channel `ch` on the calling runner connection. */
  channel(ch: number): AgentChannel
}

/** Sends a frame that belongs to no channel (`session_closed`) to the connected runner, if any. */
export type Broadcast = (frame: AgentFrame) => void

/**
 * The sessions of a sandbox as the agent server sees them: it forwards every `session.*`
 * call here with parsed params, and asks for a shell's cwd and exported env when a
 * background process starts "in a session".
 */
export interface SessionService {
  /** Handles one `session.*` call: its result, or a promise of it when it has to wait. */
  handle<M extends SessionMethod>(
    method: M,
    params: AgentParams<M>,
    context: MethodContext,
  ): CallAnswer<AgentResultOf<M>>
  /** The current cwd and exported variables of a session's shell. */
  shellState(sessionId: string): Promise<{ cwd: string; env: Record<string, string> }>
  /** Where to send link-wide frames. */
  setBroadcast(broadcast: Broadcast): void
  /** Ends every shell (agent shutdown). */
  closeAll(): Promise<void>
}
