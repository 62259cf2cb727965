// The runs whose lines are in bash's stdin, in the order bash runs them: the write-ahead
// window of one session.
//
// Model: the agent writes up to WINDOW_LINES run lines ahead, so bash goes from one run to the
// next without waiting for the agent. The first line is the active run; a marker for a later
// line means bash is past every earlier line on that stream (bash runs lines in order), so an
// earlier line that printed no marker was aborted (by SIGINT) or swallowed (by a command that
// read bash's stdin). Output on a stream belongs to the first line whose marker on that stream
// has not arrived. Each line has a free slot naming its command and stdin files; a slot is
// free again once its line has ended on both streams (the lowest first, so runs sent one at a
// time keep using slot 0: a file bash read last time is cheaper to rewrite and read again).
// Runs with a stdin pipe and internal runs are barriers: written only into an empty window
// and with nothing behind them, as each needs the shell's state at its start. The files of the
// window hold at most WINDOW_BYTES beyond its first line. While bash still has more than
// REFILL_AT lines to run, no line is added: lines go in once half the window has drained, many
// per write, so a burst costs the agent and bash one pipe write and read per batch of lines
// rather than one per run, and bash never waits, having REFILL_AT lines left when it is refilled.
import type { StreamName } from '@conch/protocol'
import type { Run } from './session-run.ts'

/** Most run lines in bash's stdin at once. */
export const WINDOW_LINES = 32
/** Lines are added only while bash has at most this many left to run. */
export const REFILL_AT = WINDOW_LINES / 2
/**
 * Most command and stdin bytes in the window's files (on the temp root, often tmpfs) once it
 * holds more than one line; a larger run is written alone.
 */
export const WINDOW_BYTES = 1_048_576

/** Whether a run must be alone in the window. */
function isBarrier(run: Run): boolean {
  return run.req.stdinPipe === true || run.req.internal === true
}

/** The lines written into bash and not yet ended, oldest first. */
export class RunWindow {
  readonly #lines: Run[] = []
  /** Free slots, the lowest last: sequential runs reuse slot 0, whose files stay warm. */
  #free: number[] = Array.from({ length: WINDOW_LINES }, (_, i) => WINDOW_LINES - 1 - i)
  #bytes = 0

  /** How many lines are in bash. */
  get size(): number {
    return this.#lines.length
  }

  /** The oldest line's run: the active run, or the next to become active. */
  get head(): Run | undefined {
    return this.#lines[0]
  }

  /** Every run in the window, oldest first. */
  get runs(): readonly Run[] {
    return this.#lines
  }

  /** Whether bash has drained enough of the window for more lines to be written now. */
  get wantsLines(): boolean {
    return this.#lines.length <= REFILL_AT
  }

  /** Whether `next` may be written behind the lines in bash now. */
  canWrite(next: Run): boolean {
    const last = this.#lines.at(-1)
    if (last === undefined) return true
    if (this.#lines.length >= WINDOW_LINES || this.#bytes + next.fileBytes > WINDOW_BYTES) return false
    return !isBarrier(last) && !isBarrier(next)
  }

  /** Adds a run whose line is about to be written, and gives it its slot. */
  add(run: Run): void {
    run.slot = this.#free.pop() ?? 0
    this.#bytes += run.fileBytes
    this.#lines.push(run)
  }

  /** Takes back the run just added, whose line was never written: its slot is free again. */
  withdraw(run: Run): void {
    if (this.#lines.at(-1) !== run) return
    this.#lines.pop()
    this.#bytes -= run.fileBytes
    this.#free.push(run.slot)
  }

  /** Position of the line with `nonce`, or -1. */
  indexOf(nonce: string): number {
    for (let i = 0; i < this.#lines.length; i++) if (this.#lines[i]!.nonce === nonce) return i
    return -1
  }

  /**
   * Records the marker of line `index` on `stream` (with its exit code on stdout): every
   * earlier line has ended on that stream too.
   */
  markEnded(index: number, stream: StreamName, exitCode: number | null): void {
    for (let i = 0; i < index; i++) this.#lines[i]!.done[stream] = true
    const run = this.#lines[index]!
    if (run.done[stream]) return
    run.done[stream] = true
    if (exitCode !== null) run.exitCode = exitCode
  }

  /** Position of the held line whose held body prints `nonce`, or -1. */
  indexOfHeld(nonce: string): number {
    for (let i = 0; i < this.#lines.length; i++) if (this.#lines[i]!.heldNonce === nonce) return i
    return -1
  }

  /**
   * Records the held body's marker of line `index` on `stream`: earlier lines have ended on
   * that stream; on stdout, `exitCode` is `$?` before it, the exit code of the line before.
   */
  markHeld(index: number, stream: StreamName, exitCode: number | null): void {
    for (let i = 0; i < index; i++) this.#lines[i]!.done[stream] = true
    if (exitCode === null) return
    this.#lines[index]!.heldSeen = true
    const before = this.#lines[index - 1]
    if (before !== undefined && before.exitCode === null) before.exitCode = exitCode
  }

  /** A sync line's marker: it was written behind every line in the window. */
  markAllEnded(stream: StreamName): void {
    for (const run of this.#lines) run.done[stream] = true
  }

  /** The run that output on `stream` belongs to now. */
  owner(stream: StreamName): Run | undefined {
    for (const run of this.#lines) if (!run.done[stream]) return run
    return undefined
  }

  /** Removes the oldest line (it has ended on both streams). */
  shift(): Run | undefined {
    const run = this.#lines.shift()
    if (run === undefined) return undefined
    this.#bytes -= run.fileBytes
    this.#free.push(run.slot)
    return run
  }

  /** Empties the window and returns its runs. */
  clear(): Run[] {
    this.#bytes = 0
    for (const run of this.#lines) this.#free.push(run.slot)
    return this.#lines.splice(0)
  }
}
