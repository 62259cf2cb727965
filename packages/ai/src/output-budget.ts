// Keeps a command's output within what a model's context can take: the first and the last
// bytes of a stream, with the middle elided and a notice that says how much was left out and how
// to read it. Bytes are counted, not characters, because the budget is the operator's.

/** A stream's text as the model sees it. */
export interface BudgetedText {
  /** The head, an elision line when bytes were left out, and the tail. */
  text: string
  /** Bytes the command wrote to this stream in all. */
  totalBytes: number
  /** Bytes left out of `text`; 0 when everything fitted. */
  elidedBytes: number
}

/** Default bytes of each output stream a tool result carries (about 8k tokens each). */
export const DEFAULT_OUTPUT_BUDGET_BYTES = 32 * 1024

const encoder = new TextEncoder()

/**
 * Collects one stream's chunks keeping at most `budgetBytes`: the first half of the budget as it
 * arrives and a rolling window of the last half. Memory stays within about twice the budget
 * whatever the command writes.
 */
export class OutputBudget {
  readonly #headLimit: number
  readonly #tailLimit: number
  #head: Uint8Array[] = []
  #headBytes = 0
  #tail: Uint8Array[] = []
  #tailBytes = 0
  #total = 0

  constructor(budgetBytes: number) {
    this.#headLimit = Math.ceil(budgetBytes / 2)
    this.#tailLimit = Math.floor(budgetBytes / 2)
  }

  /** A whole text as the model sees it within `budgetBytes`. */
  static fit(text: string, budgetBytes: number): string {
    const budget = new OutputBudget(budgetBytes)
    budget.push(text)
    return budget.finish().text
  }

  /** Bytes seen so far. */
  get totalBytes(): number {
    return this.#total
  }

  /** Adds a chunk of the stream. */
  push(chunk: string | Uint8Array): void {
    let bytes = typeof chunk === 'string' ? encoder.encode(chunk) : chunk
    this.#total += bytes.length
    if (this.#headBytes < this.#headLimit) {
      const take = Math.min(bytes.length, this.#headLimit - this.#headBytes)
      this.#head.push(bytes.subarray(0, take))
      this.#headBytes += take
      bytes = bytes.subarray(take)
    }
    if (bytes.length === 0 || this.#tailLimit === 0) return
    this.#tail.push(bytes)
    this.#tailBytes += bytes.length
    while (this.#tailBytes - (this.#tail[0]?.length ?? 0) >= this.#tailLimit) {
      this.#tailBytes -= this.#tail.shift()?.length ?? 0
    }
  }

  /** The last `lines` lines seen, for progress messages. */
  lastLines(lines: number): string {
    const text = new TextDecoder().decode(concat(this.#tail.length > 0 ? this.#tail : this.#head))
    return text
      .split('\n')
      .slice(-lines - 1)
      .join('\n')
      .trimEnd()
  }

  /** The stream as the model sees it. */
  finish(): BudgetedText {
    const head = concat(this.#head)
    let tail = concat(this.#tail)
    if (tail.length > this.#tailLimit) tail = tail.subarray(tail.length - this.#tailLimit)
    const elidedBytes = this.#total - head.length - tail.length
    // Lossy decoding at the two cut points: a character split by the cut becomes U+FFFD.
    const decode = (bytes: Uint8Array): string => new TextDecoder().decode(bytes)
    if (elidedBytes === 0) return { text: decode(concat([head, tail])), totalBytes: this.#total, elidedBytes }
    const notice = `\n[… ${elidedBytes} bytes elided (of ${this.#total}); redirect the output to a file and read ranges of it with file_read …]\n`
    return { text: decode(head) + notice + decode(tail), totalBytes: this.#total, elidedBytes }
  }
}

function concat(chunks: readonly Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0] as Uint8Array
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0))
  let at = 0
  for (const c of chunks) {
    out.set(c, at)
    at += c.length
  }
  return out
}
