// The runs waiting for a session's shell, first in first out. A shell may hold many thousands
// of pipelined runs, so taking the oldest is O(1): it advances a head index instead of
// `Array.shift`, which moves the whole array, and compacts the array only now and then.

/** Taken slots at the head after which the array is compacted, once they are half of it. */
const COMPACT_AFTER = 1024

/** A FIFO queue with O(1) take from the head. */
export class RunQueue<T> {
  /** Queued items from `#head` on; slots before it are taken (and cleared). */
  #items: (T | undefined)[] = []
  #head = 0

  /** How many items wait. */
  get size(): number {
    return this.#items.length - this.#head
  }

  /** Adds an item at the tail. */
  push(item: T): void {
    this.#items.push(item)
  }

  /** The oldest item, left in place. */
  peek(): T | undefined {
    return this.#items[this.#head]
  }

  /** Puts `items` back at the head, in their order (runs whose written lines ran nothing). */
  pushFront(items: readonly T[]): void {
    if (items.length === 0) return
    this.#items.splice(this.#head, 0, ...items)
  }

  /** Removes and returns the oldest item. */
  take(): T | undefined {
    const item = this.#items[this.#head]
    if (item === undefined) return undefined
    this.#items[this.#head] = undefined
    this.#head += 1
    if (this.#head === this.#items.length) {
      this.#items = []
      this.#head = 0
    } else if (this.#head >= COMPACT_AFTER && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head)
      this.#head = 0
    }
    return item
  }
}
