// A channel attached to a session's output: the replay from an offset, then live events, with
// the channel's credit as the brake on the shell. Log records carry the link's names and
// fields, so each goes out as it is, with the channel number added.
//
// Output records that follow each other in the log (same stream, same run, contiguous offsets)
// leave as one frame of at most `LIMITS.maxOutputFrameBytes`, its payload the records' bytes
// written back to back (one writev, no copy), and at most the channel's credit plus one data
// chunk, so a frame never overruns the credit by more than a single record could, which every
// runner allows (older ones included). Live output waits for the end of the event-loop turn
// that read it, so the pipe reads of one turn (libuv reads up to 64 KiB at a time) share a
// frame; a short read (under 1 KiB: the pipe was drained) and any other event (a run's start or
// exit, the shell closing) send what waits at once, so neither is delayed. Fewer, larger frames
// cost every hop (agent, runner, client) less per byte; the records, and so replay by offset,
// are unchanged. A queued record holds its pooled read buffer's lease (read-buffer-pool.ts)
// until the link's socket has no unwritten bytes after the frame that carried it was sent (so
// the kernel took it), or the channel closed before sending it.
import { LIMITS } from '@conch/protocol/zod-free'
import type { AgentChannel } from './agent-channel.ts'
import type { BashSession } from './bash-session.ts'
import { isOutput, type LogEvent, type OutputEvent } from './log-records.ts'
import { leaseOf } from './read-buffer-pool.ts'

/** An item in an attached channel's send queue. */
type Outgoing = LogEvent | { type: 'scrollback_end'; offset: number }

/** Largest payload of one output frame. */
export const OUTPUT_FRAME_MAX_BYTES = LIMITS.maxOutputFrameBytes

/** A live read shorter than this is sent at once rather than held for the turn's other reads. */
export const JOIN_MIN_BYTES = 1024

/**
 * How many leading items of `queue` (output records) go out as one frame: those that continue
 * the first one's stream, run and offsets, while the payload stays within `maxBytes`. At least 1.
 */
export function outputRunLength(queue: readonly Outgoing[], maxBytes: number): number {
  const first = queue[0] as OutputEvent
  let bytes = first.data.length
  let end = first.offset + bytes
  let n = 1
  for (; n < queue.length; n++) {
    const e = queue[n]!
    if (!isOutput(e) || e.type !== first.type || e.id !== first.id || e.offset !== end) break
    if (bytes + e.data.length > maxBytes) break
    bytes += e.data.length
    end += e.data.length
  }
  return n
}

/**
 * Attaches a channel to a session: replays the session's output log from `offset` (its end
 * when absent), marks the end of the replay, then forwards live events. While the channel has
 * no credit, events wait in a queue and the log subscription is paused, which pauses the shell.
 */
export function attachChannel(session: BashSession, channel: AgentChannel, offset: number | undefined): void {
  const from = offset ?? session.log.endOffset
  const queue: Outgoing[] = []
  /** Sent records holding a lease whose frame the kernel may not have taken yet. */
  let unwritten: OutputEvent[] = []
  const releaseWritten = (): void => {
    if (unwritten.length === 0 || !channel.flushed()) return
    for (const r of unwritten) leaseOf(r.data)?.release()
    unwritten = []
  }
  /** A queued record keeps its pooled read buffer (if any) until it is sent or dropped. */
  const hold = (e: LogEvent): void => {
    if (isOutput(e)) leaseOf(e.data)?.acquire()
  }
  let paused = false
  let turnEnd: NodeJS.Immediate | null = null
  /** Sends the item at the head of the queue (with the output records that join it); false when paused. */
  const sendHead = (): boolean => {
    const e = queue[0]!
    if (isOutput(e)) {
      // Within the credit plus one data chunk, the overrun every runner allows: never more.
      const room = Math.max(channel.credit, 0) + LIMITS.maxDataChunkBytes
      const n = outputRunLength(queue, Math.min(OUTPUT_FRAME_MAX_BYTES, room))
      const records = queue.splice(0, n) as OutputEvent[]
      const payload = n === 1 ? e.data : records.map((r) => r.data)
      const more = channel.sendPayload({ type: e.type, id: e.id, offset: e.offset }, payload)
      // The link holds the frame's views until the kernel takes them: their leases wait until
      // the link's socket holds no unwritten bytes (then every frame sent so far was taken).
      for (const r of records) if (leaseOf(r.data) !== undefined) unwritten.push(r)
      releaseWritten()
      return more
    }
    queue.shift()
    if (e.type === 'shell_closed') {
      // The log's record sits at an offset; the link's frame names the session instead.
      channel.end({ type: e.type, sessionId: session.id, code: e.code, signal: e.signal, reason: e.reason })
    } else channel.send(e)
    return true
  }
  /** Live output bytes queued since the last pump. */
  let waiting = 0
  const pump = (): void => {
    waiting = 0
    while (!paused && queue.length > 0 && !channel.done) {
      if (!sendHead()) paused = true
    }
  }
  const onTurnEnd = (): void => {
    turnEnd = null
    pump()
  }
  const { replay, subscription } = session.log.subscribe(from, (event) => {
    hold(event)
    queue.push(event)
    // A short read (a line, a prompt) says the pipe is drained: nothing would join it, so it goes
    // at once with what waits. A turn that read a frame's worth sends it now: the queue never
    // holds more than that.
    if (isOutput(event) && event.data.length >= JOIN_MIN_BYTES) {
      waiting += event.data.length
      if (waiting >= OUTPUT_FRAME_MAX_BYTES) pump()
      else turnEnd ??= setImmediate(onTurnEnd)
    } else pump()
    // A pump deferred to the turn's end that finds no credit leaves `paused` set, and the next
    // event is refused: the log then pauses the shell, as when a send runs out of credit.
    return !paused
  })
  for (const e of replay) hold(e)
  queue.push(...replay, { type: 'scrollback_end', offset: session.log.endOffset })
  channel.onResume(() => {
    releaseWritten()
    paused = false
    pump()
    if (!paused) subscription.resume()
  })
  channel.onClose(() => {
    if (turnEnd !== null) clearImmediate(turnEnd)
    turnEnd = null
    subscription.close()
    // Records never sent are no longer read; sent ones the link may still hold stay held.
    for (const e of queue.splice(0)) if (isOutput(e)) leaseOf(e.data)?.release()
  })
  pump()
}
