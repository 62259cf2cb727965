// A channel attached to a session's output: the replay from an offset, then live events, with
// the channel's credit as the brake on the shell.
import { assertNever } from '@conch/protocol/zod-free'
import type { AgentChannel } from './agent-channel.ts'
import type { BashSession } from './bash-session.ts'
import type { LogEvent } from './output-log.ts'

/** An item in an attached channel's send queue. */
type Outgoing = LogEvent | { type: 'replay-end'; offset: number }

/**
 * Attaches a channel to a session: replays the session's output log from `offset` (its end
 * when absent), marks the end of the replay, then forwards live events. While the channel has
 * no credit, events wait in a queue and the log subscription is paused, which pauses the shell.
 */
export function attachChannel(session: BashSession, channel: AgentChannel, offset: number | undefined): void {
  const from = offset ?? session.log.endOffset
  const queue: Outgoing[] = []
  let paused = false
  const send = (e: Outgoing): boolean => {
    switch (e.type) {
      case 'data':
        return channel.output(e.stream, e.runId, e.offset, e.data)
      case 'run-start':
        channel.event({ type: 'shell_start', id: e.runId, offset: e.offset })
        return true
      case 'run-exit':
        channel.event({
          type: 'shell_exit',
          id: e.runId,
          code: e.exitCode,
          timedOut: e.timedOut,
          durationMs: e.durationMs,
          offset: e.offset,
          ...(e.oomKilled === true ? { oomKilled: true } : {}),
        })
        return true
      case 'replay-end':
        channel.event({ type: 'scrollback_end', offset: e.offset })
        return true
      case 'closed':
        channel.end({ type: 'shell_closed', sessionId: session.id, ...e.info })
        return true
      default:
        return assertNever(e)
    }
  }
  const pump = (): void => {
    while (!paused && queue.length > 0 && !channel.done) {
      if (!send(queue.shift()!)) paused = true
    }
  }
  const { replay, subscription } = session.log.subscribe(from, (event) => {
    queue.push(event)
    pump()
    return !paused
  })
  queue.push(...replay, { type: 'replay-end', offset: session.log.endOffset })
  channel.onResume(() => {
    paused = false
    pump()
    if (!paused) subscription.resume()
  })
  channel.onClose(() => subscription.close())
  pump()
}
