// A session's output log: the scrollback that clients replay from and subscribe to.
//
// Model: every output byte of a session, stdout and stderr interleaved in arrival order, gets
// the next position of one session-wide byte offset. Data events cover [offset, offset+len);
// zero-length events (run start, run exit, closed) sit at one offset. The log holds at most
// `maxBytes` and evicts the oldest events first; `startOffset` is the smallest offset it can
// still replay from. Every record counts what it costs in memory, not only its data: a fixed
// overhead (the event object, its buffer's objects, its numbers) plus its bytes and its run id,
// so a log of many silent or tiny runs stays as bounded as one of large output.
// Evicted records leave the backing array at once, so nothing outlives its eviction. Logs may
// share a `ScrollbackBudget` that bounds their sum and evicts from the largest of them.
// Subscribers receive every new event synchronously; a subscriber that reports itself full
// asks the owner to stop producing (the session pauses bash's pipes) until it resumes. With no
// subscriber, the log only records and evicts.
import type { AgentShellExit, AgentShellStart, ShellClosedInfo, StreamName } from '@conch/protocol'
import { AgentError } from './agent-error.ts'
import type { BudgetedLog, ScrollbackBudget } from './scrollback-budget.ts'

// Records carry the wire's names and fields (`shell_out`, `shell_start`, ...; run id `id`), so
// a channel forwards them as they are: each is its link frame without the channel number.

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

/** Receives live events; returns false when it cannot take more for now. */
export type LogListener = (event: LogEvent) => boolean

/** A live subscription to a log. */
export interface LogSubscription {
  /** Tells the log the subscriber can take events again after it returned false. */
  resume(): void
  /** Ends the subscription. */
  close(): void
}

/** Called when the log's consumers become full (true) or all have room again (false). */
export type PressureListener = (full: boolean) => void

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
      return DATA_RECORD_OVERHEAD_BYTES + event.data.length + (event.id?.length ?? 0)
    case 'shell_start':
    case 'shell_exit':
      return EVENT_RECORD_OVERHEAD_BYTES + event.id.length
    case 'shell_closed':
      return EVENT_RECORD_OVERHEAD_BYTES + event.reason.length
  }
}

interface Subscriber {
  listener: LogListener
  full: boolean
}

/** Bounded, offset-addressed event log with backpressured subscribers. */
export class OutputLog implements BudgetedLog {
  readonly #maxBytes: number
  readonly #onPressure: PressureListener
  #budget: ScrollbackBudget | undefined
  /** Held events from `#head` on; slots before it are cleared. */
  #events: (LogEvent | undefined)[] = []
  #head = 0
  #bytes = 0
  #start = 0
  #end = 0
  #fullCount = 0
  readonly #subscribers = new Set<Subscriber>()

  /**
   * Keeps at most `maxBytes`, and with a `budget` also gives up its oldest records when the
   * budget's sum is over and this log is the largest; `onPressure` hears when consumers fill up
   * and drain.
   */
  constructor(maxBytes: number, onPressure: PressureListener = () => {}, budget?: ScrollbackBudget) {
    this.#maxBytes = maxBytes
    this.#onPressure = onPressure
    this.#budget = budget
    budget?.join(this)
  }

  /** Leaves the shared budget, giving back everything held (the session or process is gone). */
  release(): void {
    this.#budget?.leave(this)
    this.#budget = undefined
  }

  /** Evicts the oldest record (the shared budget asks); false when none is held. */
  evictOldest(): boolean {
    if (this.#head >= this.#events.length) return false
    this.#evictOne()
    this.#compact()
    return true
  }

  /** The offset the next byte gets. */
  get endOffset(): number {
    return this.#end
  }

  /** The smallest offset still held. */
  get startOffset(): number {
    return this.#start
  }

  /** Bytes held: every record's data plus its overhead (see `recordBytes`). */
  get heldBytes(): number {
    return this.#bytes
  }

  /** Records held. */
  get heldRecords(): number {
    return this.#events.length - this.#head
  }

  /** Whether some subscriber is full. */
  get isFull(): boolean {
    return this.#fullCount > 0
  }

  /** Appends output bytes and returns the event. */
  appendData(stream: StreamName, id: string | null, data: Buffer): OutputEvent {
    const type = stream === 'stdout' ? 'shell_out' : 'shell_err'
    const event: OutputEvent = { type, offset: this.#end, id, data }
    this.#end += data.length
    this.#push(event)
    return event
  }

  /** Records a run start at the current offset. */
  appendRunStart(id: string): ShellStartEvent {
    const event: ShellStartEvent = { type: 'shell_start', id, offset: this.#end }
    this.#push(event)
    return event
  }

  /** Records a run exit at the current offset. */
  appendRunExit(exit: Omit<ShellExitEvent, 'type' | 'offset'>): ShellExitEvent {
    const event: ShellExitEvent = {
      type: 'shell_exit',
      id: exit.id,
      code: exit.code,
      timedOut: exit.timedOut,
      durationMs: exit.durationMs,
      offset: this.#end,
    }
    if (exit.oomKilled !== undefined) event.oomKilled = exit.oomKilled
    this.#push(event)
    return event
  }

  /** Records that the shell closed. */
  appendClosed(info: ShellClosedInfo): ShellClosedEvent {
    const event: ShellClosedEvent = {
      type: 'shell_closed',
      code: info.code,
      signal: info.signal,
      reason: info.reason,
      offset: this.#end,
    }
    this.#push(event)
    return event
  }

  /**
   * Every held event from `offset` on: data sliced exactly at `offset`, and zero-length
   * events at positions >= `offset`. Throws OUTPUT_LOST when `offset` was evicted.
   */
  readFrom(offset: number): LogEvent[] {
    if (offset < this.#start) {
      throw new AgentError(
        'OUTPUT_LOST',
        `output from offset ${offset} was evicted from the scrollback; the earliest offset still held is ${this.#start}.`,
        { details: { earliestOffset: this.#start, requestedOffset: offset } },
      )
    }
    if (offset > this.#end) {
      throw new AgentError(
        'BAD_REQUEST',
        `offset ${offset} is beyond the end of the output log (${this.#end}); reattach from ${this.#end} or earlier.`,
        { details: { endOffset: this.#end, requestedOffset: offset } },
      )
    }
    const out: LogEvent[] = []
    for (let i = this.#head; i < this.#events.length; i++) {
      const e = this.#events[i]!
      if (isOutput(e)) {
        const endOfEvent = e.offset + e.data.length
        if (endOfEvent <= offset) continue
        if (e.offset < offset) {
          out.push({ ...e, offset, data: e.data.subarray(offset - e.offset) })
        } else {
          out.push(e)
        }
      } else if (e.offset >= offset) {
        out.push(e)
      }
    }
    return out
  }

  /**
   * Replays from `offset` (see `readFrom`) and subscribes to live events in one step, so no
   * event falls between the replay and the subscription.
   */
  subscribe(offset: number, listener: LogListener): { replay: LogEvent[]; subscription: LogSubscription } {
    const replay = this.readFrom(offset)
    const sub: Subscriber = { listener, full: false }
    this.#subscribers.add(sub)
    const subscription: LogSubscription = {
      resume: () => this.#setFull(sub, false),
      close: () => {
        if (!this.#subscribers.delete(sub)) return
        this.#setFull(sub, false, true)
      },
    }
    return { replay, subscription }
  }

  /** Drops every subscriber (the session is gone). */
  closeSubscribers(): void {
    for (const sub of this.#subscribers) this.#setFull(sub, false, true)
    this.#subscribers.clear()
  }

  #push(event: LogEvent): void {
    this.#events.push(event)
    const bytes = recordBytes(event)
    this.#bytes += bytes
    this.#budget?.adjust(bytes)
    this.#evict()
    this.#budget?.enforce()
    for (const sub of this.#subscribers) {
      const room = sub.listener(event)
      if (!room) this.#setFull(sub, true)
    }
  }

  #setFull(sub: Subscriber, full: boolean, removing = false): void {
    if (sub.full === full) return
    if (!removing && !this.#subscribers.has(sub)) return
    sub.full = full
    const wasFull = this.#fullCount > 0
    this.#fullCount += full ? 1 : -1
    const isFull = this.#fullCount > 0
    if (wasFull !== isFull) this.#onPressure(isFull)
  }

  #evict(): void {
    while (this.#bytes > this.#maxBytes && this.#head < this.#events.length) this.#evictOne()
    this.#compact()
  }

  /** Evicts the oldest record, then the zero-length records that no held byte follows any more. */
  #evictOne(): void {
    const e = this.#dropHead()
    this.#start = Math.max(this.#start, isOutput(e) ? e.offset + e.data.length : e.offset)
    for (
      let next = this.#events[this.#head];
      next !== undefined && !isOutput(next) && next.offset < this.#start;
    ) {
      this.#dropHead()
      next = this.#events[this.#head]
    }
  }

  /** Drops the cleared slots once they are half the array (or all of it). */
  #compact(): void {
    if (this.#head === this.#events.length) {
      this.#events = []
      this.#head = 0
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#events.length) {
      this.#events = this.#events.slice(this.#head)
      this.#head = 0
    }
  }

  /** Removes the oldest held record, clearing its slot so it is garbage at once. */
  #dropHead(): LogEvent {
    const e = this.#events[this.#head]!
    this.#events[this.#head] = undefined
    this.#head += 1
    const bytes = recordBytes(e)
    this.#bytes -= bytes
    this.#budget?.adjust(-bytes)
    return e
  }
}
