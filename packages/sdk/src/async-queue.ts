// A push-to-pull bridge: callbacks push values, an async iterator pulls them in order.

/** An unbounded queue read by one async iterator. */
export class AsyncQueue<T> {
  #items: T[] = []
  #waiting: { resolve: (r: IteratorResult<T>) => void; reject: (err: unknown) => void } | null = null
  #done = false
  #error: { error: unknown } | null = null

  /** Adds a value. */
  push(value: T): void {
    if (this.#done) return
    const w = this.#waiting
    if (w) {
      this.#waiting = null
      w.resolve({ value, done: false })
    } else this.#items.push(value)
  }

  /** Ends the iteration after the queued values. */
  end(): void {
    this.#done = true
    const w = this.#waiting
    if (w && this.#items.length === 0) {
      this.#waiting = null
      w.resolve({ value: undefined, done: true })
    }
  }

  /** Ends the iteration with an error after the queued values. */
  fail(error: unknown): void {
    this.#error = { error }
    this.#done = true
    const w = this.#waiting
    if (w && this.#items.length === 0) {
      this.#waiting = null
      w.reject(error)
    }
  }

  /** Takes the next value. */
  next(): Promise<IteratorResult<T>> {
    const item = this.#items.shift()
    if (item !== undefined) return Promise.resolve({ value: item, done: false })
    if (this.#done) {
      if (this.#error) {
        const { error } = this.#error
        this.#error = null
        return Promise.reject(error)
      }
      return Promise.resolve({ value: undefined, done: true })
    }
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject }
    })
  }
}
