// One byte budget for every output log of an agent.
//
// Model: each session and each background process keeps its own scrollback, bounded by its own
// `scrollbackBytes`; this budget bounds their sum, so the agent's memory does not scale with the
// number of sessions times their scrollback. Logs report every byte they take and give back. When
// the sum passes the budget, the log holding the most evicts its oldest records until the sum is
// within it again: a chatty session loses its own old output before a quiet one loses any.

/** What the budget needs of a log. */
export interface BudgetedLog {
  /** Bytes the log holds, as it counts them against the budget. */
  readonly heldBytes: number
  /** Evicts the log's oldest record; false when it holds none. */
  evictOldest(): boolean
}

/**
 * The default sum of all scrollback of an agent. With the history of 64 sessions (512 KiB each at
 * most), finished processes' records and the agent's own ~25 MiB, it stays under the agent's
 * 192 MiB old-space cap (`AGENT_NODE_FLAGS`).
 */
export const AGENT_SCROLLBACK_BUDGET_BYTES = 96 * 1024 * 1024

/** A byte budget shared by the output logs of one agent. */
export class ScrollbackBudget {
  /** The most bytes the logs may hold together. */
  readonly maxBytes: number
  readonly #logs = new Set<BudgetedLog>()
  #held = 0

  /** A budget of `maxBytes` for all logs together. */
  constructor(maxBytes: number = AGENT_SCROLLBACK_BUDGET_BYTES) {
    this.maxBytes = maxBytes
  }

  /** Bytes held by all logs together. */
  get heldBytes(): number {
    return this.#held
  }

  /** Logs sharing the budget. */
  get logs(): number {
    return this.#logs.size
  }

  /** Adds a log (holding nothing yet). */
  join(log: BudgetedLog): void {
    this.#logs.add(log)
  }

  /** Removes a log that is gone, with everything it held. */
  leave(log: BudgetedLog): void {
    if (this.#logs.delete(log)) this.#held -= log.heldBytes
  }

  /** A log took (positive) or gave back (negative) `bytes`. */
  adjust(bytes: number): void {
    this.#held += bytes
  }

  /** Evicts from the largest logs until the sum is within the budget. */
  enforce(): void {
    while (this.#held > this.maxBytes) {
      let largest: BudgetedLog | undefined
      for (const log of this.#logs)
        if (largest === undefined || log.heldBytes > largest.heldBytes) largest = log
      if (largest === undefined || !largest.evictOldest()) return
    }
  }
}
