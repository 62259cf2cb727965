// The command history of one session: an entry per user run, oldest first, bounded in count
// and in memory (the oldest entries go first). Indexes keep counting across dropped entries,
// so an index stays valid for as long as its entry is kept.
import type { HistoryEntry } from '@conch/protocol'

/** Most history entries kept. */
const HISTORY_LIMIT = 10_000
/** The most memory the history of one session may take (oldest entries go first). */
export const HISTORY_MAX_BYTES = 512 * 1024
/** What one history entry costs beyond its command text: the entry object and its numbers. */
const HISTORY_ENTRY_OVERHEAD_BYTES = 128

/** What a history entry counts for against `HISTORY_MAX_BYTES`: two bytes per UTF-16 unit of its command, plus overhead. */
function historyEntryBytes(entry: HistoryEntry): number {
  return HISTORY_ENTRY_OVERHEAD_BYTES + 2 * entry.command.length
}

/** What to select from a history. */
export interface HistoryQuery {
  /** Only commands starting with this. */
  prefix?: string
  /** Only commands containing this. */
  contains?: string
  /** Only the newest this many. */
  limit?: number
}

/** The bounded command history of one session. */
export class SessionHistory {
  #entries: HistoryEntry[] = []
  #base = 0
  #bytes = 0

  /** Memory the history counts against `HISTORY_MAX_BYTES`. */
  get bytes(): number {
    return this.#bytes
  }

  /**
   * Adds an entry for a run that starts now, dropping the oldest entries over the bounds. The
   * returned entry is the kept one: the run fills in its exit code and duration when it ends.
   */
  record(command: string, startedAt: number): HistoryEntry {
    const entry: HistoryEntry = {
      index: this.#base + this.#entries.length,
      command,
      startedAt,
      exitCode: null,
      durationMs: null,
    }
    this.#entries.push(entry)
    this.#bytes += historyEntryBytes(entry)
    while (
      this.#entries.length > 1 &&
      (this.#entries.length > HISTORY_LIMIT || this.#bytes > HISTORY_MAX_BYTES)
    ) {
      this.#bytes -= historyEntryBytes(this.#entries.shift()!)
      this.#base += 1
    }
    return entry
  }

  /**
   * Replaces the history with entries a snapshot kept, within the same bounds (the oldest go
   * first). Indexes continue from the first entry's, renumbered so they stay consecutive.
   */
  load(entries: readonly HistoryEntry[]): void {
    const first = entries[0]?.index ?? 0
    const kept = entries.map((e, i) => ({ ...e, index: first + i })).slice(-HISTORY_LIMIT)
    this.#entries = kept
    this.#bytes = kept.reduce((sum, e) => sum + historyEntryBytes(e), 0)
    while (this.#entries.length > 1 && this.#bytes > HISTORY_MAX_BYTES) {
      this.#bytes -= historyEntryBytes(this.#entries.shift()!)
    }
    this.#base = this.#entries[0]?.index ?? 0
  }

  /** Copies of every entry matching the query, oldest first. */
  query(query: HistoryQuery = {}): HistoryEntry[] {
    let entries = this.#entries
    if (query.prefix !== undefined) {
      const p = query.prefix
      entries = entries.filter((e) => e.command.startsWith(p))
    }
    if (query.contains !== undefined) {
      const c = query.contains
      entries = entries.filter((e) => e.command.includes(c))
    }
    if (query.limit !== undefined) entries = entries.slice(-query.limit)
    return entries.map((e) => ({ ...e }))
  }

  /** A copy of one entry by index, or null. */
  entry(index: number): HistoryEntry | null {
    const e = this.#entries[index - this.#base]
    return e === undefined ? null : { ...e }
  }
}
