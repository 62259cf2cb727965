// Flow control of a shell's output on the client side. Every output frame covers a range of the
// session's log offsets. A range handed to a consumer that takes it later (a `stream()` reader,
// a callback whose promise has not settled) is held until the consumer releases it; everything
// else counts as consumed on arrival. The acknowledged offset is the start of the oldest range
// still held, or the end of everything received. With a runner that speaks `output_ack` the
// shell sends it whenever it has moved by a quarter of the window, so the runner keeps at most
// a window of output in flight and a slow consumer slows the command. Ranges arrive in log order.

/** Releases one held range; calling it twice is harmless. */
export type ReleaseOutput = () => void

interface Held {
  start: number
  end: number
  released: boolean
}

/** What the flow sends acknowledgements with. */
export type AckSender = (offset: number) => void

/** The client's side of `output_ack`: what is held, and when to acknowledge. */
export class OutputFlow {
  readonly #window: number
  readonly #send: AckSender
  readonly #held: Held[] = []
  #head = 0
  #heldBytes = 0
  #received = 0
  #lastAck: number | null = null
  #enabled = false

  /** A flow whose acknowledgements keep at most `windowBytes` unacknowledged. */
  constructor(windowBytes: number, send: AckSender) {
    this.#window = windowBytes
    this.#send = send
  }

  /** Output bytes received and not yet taken by their consumer. */
  get heldBytes(): number {
    return this.#heldBytes
  }

  /** The offset everything before which has been consumed. */
  get consumed(): number {
    const first = this.#held[this.#head]
    return first ? first.start : this.#received
  }

  /**
   * A new socket's runner said hello. With `output_ack` the runner counts from where this
   * connection starts; if output is still held the shell says so at once, so the new
   * connection's window starts from what was consumed, not from what was received.
   */
  negotiated(enabled: boolean, startOffset: number | null): void {
    this.#enabled = enabled
    this.#lastAck = startOffset
    if (!enabled || startOffset === null || this.#heldBytes === 0) return
    this.#ack(this.consumed)
  }

  /** The socket attached at `offset` (the replay start); the runner counts the window from it. */
  attached(offset: number): void {
    if (offset > this.#received) this.#received = offset
    if (this.#lastAck === null) this.#lastAck = offset
  }

  /** Output `[start, end)` arrived and was consumed on arrival. */
  received(end: number): void {
    if (end <= this.#received) return
    this.#received = end
    this.#maybeAck()
  }

  /** Output `[start, end)` arrived and is held until the returned release is called. */
  hold(start: number, end: number): ReleaseOutput {
    const held: Held = { start, end, released: false }
    this.#held.push(held)
    this.#heldBytes += end - start
    if (end > this.#received) this.#received = end
    return () => {
      if (held.released) return
      held.released = true
      this.#heldBytes -= held.end - held.start
      while (this.#held[this.#head]?.released) this.#head++
      if (this.#head === this.#held.length) {
        this.#held.length = 0
        this.#head = 0
      } else if (this.#head > 1024) {
        this.#held.splice(0, this.#head)
        this.#head = 0
      }
      this.#maybeAck()
    }
  }

  #maybeAck(): void {
    if (!this.#enabled || this.#lastAck === null) return
    const offset = this.consumed
    if (offset - this.#lastAck >= this.#window / 4) this.#ack(offset)
  }

  #ack(offset: number): void {
    this.#lastAck = offset
    this.#send(offset)
  }
}
