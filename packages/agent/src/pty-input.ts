// Input to a terminal's program, written to the pty's master by the agent itself.
//
// node-pty's own writer tries a write the pty refused (EAGAIN: the program is not reading and
// the tty's input queue is full) again on the next turn of the event loop, so a program that
// never read its input while a client typed or pasted kept a core of the agent busy until it
// did. This writer tries again after a timer that backs off from 1 ms to `MAX_RETRY_MS`, keeps
// the bytes in order, and drops what is left once the pty is gone (EIO, EBADF). Each chunk's
// `onTaken` runs once the pty has it all, or once it is dropped: the agent returns the runner's
// credit for input then, so input waits in the runner's client, not in the agent's memory.
import { write } from 'node:fs'
import type { Clock } from './clock.ts'

/** The longest wait between two tries of a write the pty refused. */
export const MAX_RETRY_MS = 100

/** The bytes typed into one pty, in order, written as the program takes them. */
export class PtyInput {
  readonly #fd: number
  readonly #clock: Clock
  readonly #queue: { bytes: Uint8Array; onTaken: (() => void) | undefined }[] = []
  #writing = false
  #retryMs = 0
  #timer: unknown = null
  #closed = false

  /** Writes to the master `fd`, waiting on `clock` between tries. */
  constructor(fd: number, clock: Clock) {
    this.#fd = fd
    this.#clock = clock
  }

  /**
   * Queues a copy of `bytes` (the caller's view may be reused) behind what is pending; `onTaken`
   * runs once the pty has taken all of it or it was dropped (at once when closed or empty).
   */
  write(bytes: Uint8Array, onTaken?: () => void): void {
    if (this.#closed || bytes.byteLength === 0) {
      onTaken?.()
      return
    }
    this.#queue.push({ bytes: Uint8Array.from(bytes), onTaken })
    if (!this.#writing) this.#next()
  }

  /** Drops what is pending and writes nothing more (the program ended or the terminal closed). */
  close(): void {
    this.#closed = true
    const dropped = this.#queue.splice(0)
    if (this.#timer !== null) this.#clock.clearTimer(this.#timer)
    this.#timer = null
    for (const chunk of dropped) chunk.onTaken?.()
  }

  #next(): void {
    this.#timer = null
    const head = this.#queue[0]
    if (this.#closed || head === undefined) {
      this.#writing = false
      return
    }
    this.#writing = true
    const { bytes } = head
    write(this.#fd, bytes, 0, bytes.byteLength, null, (error, written) => {
      if (this.#closed) return
      if (error) {
        if (error.code !== 'EAGAIN') {
          this.close()
          return
        }
        this.#retryMs = Math.min(Math.max(1, this.#retryMs * 2), MAX_RETRY_MS)
        this.#timer = this.#clock.setTimer(this.#retryMs, () => this.#next())
        return
      }
      this.#retryMs = 0
      if (written < bytes.byteLength) {
        head.bytes = bytes.subarray(written)
      } else {
        this.#queue.shift()
        head.onTaken?.()
      }
      this.#next()
    })
  }
}
