// The records of an output log (output-log.ts): their shapes and what each costs in memory.
//
// Model: records carry the wire's names and fields (`shell_out`, `shell_start`, ...; run id
// `id`), so a channel forwards them as they are: each is its link frame without the channel
// number. Every record counts what it costs in memory against its log's bound, not only its
// data: a fixed overhead (the event object, its buffer's objects, its numbers) plus its bytes and
// its run id, so a log of many silent or tiny runs stays as bounded as one of large output.
import type { AgentShellExit, AgentShellStart, ShellClosedInfo } from '@conch/protocol'
import { leaseOf } from './read-buffer-pool.ts'

/** Output bytes: `shell_out` (stdout) or `shell_err` (stderr), as on the wire. */
export interface OutputEvent {
  /** Which stream: `shell_out` is stdout, `shell_err` stderr. */
  type: 'shell_out' | 'shell_err'
  /** Offset of the first byte. */
  offset: number
  /** The run that was active, or null for output written while no run was active. */
  id: string | null
  /** The bytes. */
  data: Buffer
}

/** A run started at this offset: the link's `shell_start` without its channel. */
export type ShellStartEvent = Omit<AgentShellStart, 'ch'>

/** A run finished at this offset: the link's `shell_exit` without its channel. */
export type ShellExitEvent = Omit<AgentShellExit, 'ch'>

/** The shell closed at this offset; the last event of a log. */
export type ShellClosedEvent = { type: 'shell_closed'; offset: number } & ShellClosedInfo

/** Anything recorded in an output log. */
export type LogEvent = OutputEvent | ShellStartEvent | ShellExitEvent | ShellClosedEvent

/** Whether `event` carries output bytes. */
export function isOutput(event: { type: string }): event is OutputEvent {
  return event.type === 'shell_out' || event.type === 'shell_err'
}

/**
 * What a data record costs beyond its bytes and run id, counted against the log's byte bound:
 * above the measured cost of its event object, Buffer, ArrayBuffer and native backing store
 * (about 400 bytes on Node 24), so `heldBytes` bounds the memory the log really keeps.
 */
export const DATA_RECORD_OVERHEAD_BYTES = 512

/** What a zero-length record (run start, run exit, closed) costs beyond its run id or reason. */
export const EVENT_RECORD_OVERHEAD_BYTES = 128

/** What `event` counts for against the log's byte bound. */
export function recordBytes(event: LogEvent): number {
  switch (event.type) {
    case 'shell_out':
    case 'shell_err':
      // A view into a pooled read buffer keeps the whole buffer: it counts as that much.
      return (
        DATA_RECORD_OVERHEAD_BYTES +
        Math.max(event.data.length, leaseOf(event.data)?.bytes.length ?? 0) +
        (event.id?.length ?? 0)
      )
    case 'shell_start':
    case 'shell_exit':
      return EVENT_RECORD_OVERHEAD_BYTES + event.id.length
    case 'shell_closed':
      return EVENT_RECORD_OVERHEAD_BYTES + event.reason.length
  }
}
