// A push-to-pull bridge: callbacks push values, an async iterator pulls them in order. A value
// may carry a hook that runs when the reader takes it, so the pusher knows what is still queued.

interface Item<T> {
  value: T
  onTake: (() => void) | undefined
}

/** A queue read by one async iterator; what bounds it is the pusher's business (see `onTake`). */
export class AsyncQueue<T> {
  #items: Item<T>[] = []
  #waiting: { resolve: (r: IteratorResult<T>) => void; reject: (err: unknown) => void } | null = null
  #done = false
  #error: { error: unknown } | null = null

  /** Adds a value; `onTake` runs when the reader takes it (or at once if a reader is waiting). */
  push(value: T, onTake?: () => void): void {
    if (this.#done) {
      onTake?.()
      return
    }
    const w = this.#waiting
    if (w) {
      this.#waiting = null
      onTake?.()
      w.resolve({ value, done: false })
    } else this.#items.push({ value, onTake })
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

  /** Drops every queued value (running their hooks): the reader has gone. */
  drain(): void {
    const items = this.#items
    this.#items = []
    for (const item of items) item.onTake?.()
  }

  /** Takes the next value. */
  next(): Promise<IteratorResult<T>> {
    const item = this.#items.shift()
    if (item !== undefined) {
      item.onTake?.()
      return Promise.resolve({ value: item.value, done: false })
    }
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
