// A channel attached to a session's output: the replay from an offset, then live events, with
// the channel's credit as the brake on the shell. Log records carry the link's names and
// fields, so each goes out as it is, with the channel number added.
import type { AgentChannel } from './agent-channel.ts'
import type { BashSession } from './bash-session.ts'
import { isOutput, type LogEvent } from './output-log.ts'

/** An item in an attached channel's send queue. */
type Outgoing = LogEvent | { type: 'scrollback_end'; offset: number }

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
    if (isOutput(e)) return channel.sendPayload({ type: e.type, id: e.id, offset: e.offset }, e.data)
    if (e.type === 'shell_closed') {
      // The log's record sits at an offset; the link's frame names the session instead.
      channel.end({ type: e.type, sessionId: session.id, code: e.code, signal: e.signal, reason: e.reason })
    } else channel.send(e)
    return true
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
  queue.push(...replay, { type: 'scrollback_end', offset: session.log.endOffset })
  channel.onResume(() => {
    paused = false
    pump()
    if (!paused) subscription.resume()
  })
  channel.onClose(() => subscription.close())
  pump()
}
