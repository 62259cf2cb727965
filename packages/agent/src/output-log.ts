// A session's output log: the scrollback that clients replay from and subscribe to.
//
// Model: every output byte of a session, stdout and stderr interleaved in arrival order, gets
// the next position of one session-wide byte offset. Data events cover [offset, offset+len);
// zero-length events (run start, run exit, closed) sit at one offset. The log holds at most
// `maxBytes` and evicts the oldest events first; `startOffset` is the smallest offset it can
// still replay from. Every record counts what it costs in memory, not only its data
// (log-records.ts holds the records' shapes and costs).
// Evicted records leave the backing array at once, so nothing outlives its eviction. Logs may
// share a `ScrollbackBudget` that bounds their sum and evicts from the largest of them.
// Subscribers receive every new event synchronously; a subscriber that reports itself full
// asks the owner to stop producing (the session pauses reading bash's output) until it resumes. With no
// subscriber, the log only records and evicts.
// A log that coalesces (terminals) gathers the reads of a flood of output of one stream and run
// into one record of at most `COALESCE_MAX_BYTES`, so a program writing through a pty's 4 KiB
// reads costs one record, one link frame and one WebSocket message per 64 KiB instead of per
// read. A short read (an echoed key, a prompt, the end of a burst) is recorded at once with
// whatever was gathered, so interactive output is never held; a gathering of full reads is
// recorded when it reaches the maximum or `COALESCE_WAIT_MS` after it began. Offsets are given
// at append time, so they stay exact, and the gathered bytes are recorded before any other
// record and before any read of the log (replay, subscribe): no reader misses them.
// Gathered bytes count against the bounds once recorded: at most one record's worth per log.
import type { ShellClosedInfo, StreamName } from '@conch/protocol'
import { LIMITS } from '@conch/protocol/zod-free'
import { AgentError } from './agent-error.ts'
import {
  isOutput,
  type LogEvent,
  type OutputEvent,
  recordBytes,
  type ShellClosedEvent,
  type ShellExitEvent,
  type ShellStartEvent,
} from './log-records.ts'
import { leaseOf } from './read-buffer-pool.ts'
import type { BudgetedLog, ScrollbackBudget } from './scrollback-budget.ts'

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

/** Largest record a coalescing log builds: one agent data frame's payload. */
export const COALESCE_MAX_BYTES = LIMITS.maxDataChunkBytes

/** A read at least this long suggests more output is on its way: it may wait for company. */
export const COALESCE_FULL_READ_BYTES = 1024

/** Longest a gathering of full reads waits for more before it is recorded. */
export const COALESCE_WAIT_MS = 2

/** Data appends gathered into one record (see the file comment). */
interface Gathering {
  stream: StreamName
  id: string | null
  offset: number
  chunks: Buffer[]
  bytes: number
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
  readonly #coalesce: boolean
  #gathering: Gathering | null = null
  #timer: NodeJS.Timeout | null = null

  /**
   * Keeps at most `maxBytes`, and with a `budget` also gives up its oldest records when the
   * budget's sum is over and this log is the largest; `onPressure` hears when consumers fill up
   * and drain. With `coalesce`, small data appends are gathered into larger records.
   */
  constructor(
    maxBytes: number,
    onPressure: PressureListener = () => {},
    budget?: ScrollbackBudget,
    coalesce = false,
  ) {
    this.#maxBytes = maxBytes
    this.#onPressure = onPressure
    this.#budget = budget
    this.#coalesce = coalesce
    budget?.join(this)
  }

  /** Leaves the shared budget, giving back everything held (the session or process is gone). */
  release(): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    this.#gathering = null
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

  /**
   * Bytes held: every record's data plus its overhead (see `recordBytes`); bytes still being
   * gathered count once recorded. Reading it changes nothing (the shared budget reads it while
   * it evicts).
   */
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

  /**
   * Appends output bytes at the next offsets. A coalescing log may gather them with the appends
   * that follow into one record (see the file comment); others record them at once. Returns the
   * record made at once, or null when the bytes were gathered.
   */
  appendData(stream: StreamName, id: string | null, data: Buffer): OutputEvent | null {
    if (!this.#coalesce) return this.#pushData(stream, id, data)
    if (data.length === 0) return null
    let g = this.#gathering
    if (g !== null && (g.stream !== stream || g.id !== id || g.bytes + data.length > COALESCE_MAX_BYTES)) {
      this.flush()
      g = null
    }
    const short = data.length < COALESCE_FULL_READ_BYTES
    if (g === null) {
      // Alone, a short read or a large one gains nothing from waiting: record it without a copy.
      if (short || data.length * 2 >= COALESCE_MAX_BYTES) return this.#pushData(stream, id, data)
      g = { stream, id, offset: this.#end, chunks: [], bytes: 0 }
      this.#gathering = g
      this.#timer = setTimeout(this.#onWaited, COALESCE_WAIT_MS)
    }
    g.chunks.push(data)
    g.bytes += data.length
    this.#end += data.length
    // Full once another read of this size would not fit.
    if (short || g.bytes + data.length > COALESCE_MAX_BYTES) this.flush()
    return null
  }

  /** Records the data appends gathered so far, if any (a coalescing log does so by itself). */
  flush(): void {
    const g = this.#gathering
    if (g === null) return
    this.#gathering = null
    if (this.#timer !== null) {
      clearTimeout(this.#timer)
      this.#timer = null
    }
    const data = g.chunks.length === 1 ? g.chunks[0]! : Buffer.concat(g.chunks, g.bytes)
    this.#push({ type: g.stream === 'stdout' ? 'shell_out' : 'shell_err', offset: g.offset, id: g.id, data })
  }

  readonly #onWaited = (): void => {
    this.#timer = null
    this.flush()
  }

  #pushData(stream: StreamName, id: string | null, data: Buffer): OutputEvent {
    const type = stream === 'stdout' ? 'shell_out' : 'shell_err'
    const event: OutputEvent = { type, offset: this.#end, id, data }
    this.#end += data.length
    this.#push(event)
    return event
  }

  /** Records a run start at the current offset. */
  appendRunStart(id: string): ShellStartEvent {
    this.flush()
    const event: ShellStartEvent = { type: 'shell_start', id, offset: this.#end }
    this.#push(event)
    return event
  }

  /** Records a run exit at the current offset. */
  appendRunExit(exit: Omit<ShellExitEvent, 'type' | 'offset'>): ShellExitEvent {
    this.flush()
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
    this.flush()
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
    this.flush()
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
    if (isOutput(event)) leaseOf(event.data)?.acquire()
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
    if (isOutput(e)) leaseOf(e.data)?.release()
    return e
  }
}
