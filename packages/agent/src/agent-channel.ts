// One numbered stream on the runner link, with credit-based flow control.
//
// Model: the runner opens a channel by naming it in a call (`session.attach`, `exec`,
// `process.stream`, `file.read`, `file.write`). The agent may send `LIMITS.channelWindowBytes`
// of payload on it beyond what the runner has granted with `credit` frames. `data()` returns
// false once the window is used up or the socket's buffer is full; the producer then pauses and
// waits for `onResume`. A channel ends with exactly one terminal frame (`end()`), or when the
// runner closes it or the link drops (`onClose`): producers must stop on either.
import type { AgentFrame, StreamName } from '@conch/protocol'

/** Sends a frame on the link; returns false when the socket's buffer is full. */
export type FrameSender = (frame: AgentFrame, payload?: Uint8Array) => boolean

/** `F` without its channel number, which the channel fills in. */
type WithoutChannel<F> = F extends unknown ? Omit<F, 'ch'> : never

/** A zero-length event on a channel, without `ch`. */
export type ChannelEventFrame = WithoutChannel<
  Extract<AgentFrame, { type: 'shell_start' | 'shell_exit' | 'scrollback_end' }>
>

/** A channel's terminal frame, without `ch`. */
export type ChannelEndFrame = WithoutChannel<Extract<AgentFrame, { type: 'end' | 'shell_closed' | 'error' }>>

/** A flow-controlled channel to the runner. */
export class AgentChannel {
  /** The channel number the runner chose. */
  readonly id: number
  readonly #send: FrameSender
  #credit: number
  #waiting = false
  #ended = false
  #closed = false
  readonly #resume = new Set<() => void>()
  readonly #close = new Set<() => void>()
  readonly #upload: Uint8Array[] = []
  #uploadEnded = false
  #uploadWake: (() => void) | undefined

  /** A channel that may send `window` payload bytes before it needs credit. */
  constructor(id: number, send: FrameSender, window: number) {
    this.id = id
    this.#send = send
    this.#credit = window
  }

  /** Whether no more frames may be sent (ended, or closed by the runner or the link). */
  get done(): boolean {
    return this.#ended || this.#closed
  }

  /** Sends command output (`shell_out`/`shell_err`); false means "pause until onResume". */
  output(stream: StreamName, id: string | null, offset: number, payload: Uint8Array): boolean {
    if (this.done) return false
    return this.#payload(
      { type: stream === 'stdout' ? 'shell_out' : 'shell_err', ch: this.id, id, offset },
      payload,
    )
  }

  /** Sends bytes that are not command output (a file read); false means "pause until onResume". */
  data(offset: number, payload: Uint8Array): boolean {
    if (this.done) return false
    return this.#payload({ type: 'data', ch: this.id, offset }, payload)
  }

  #payload(frame: AgentFrame, payload: Uint8Array): boolean {
    this.#credit -= payload.byteLength
    const socketOk = this.#send(frame, payload)
    if (this.#credit <= 0 || !socketOk) {
      this.#waiting = true
      return false
    }
    return true
  }

  /** Sends a zero-length event frame (shell_start, shell_exit, scrollback_end). */
  event(frame: ChannelEventFrame): void {
    if (this.done) return
    this.#send({ ...frame, ch: this.id })
  }

  /** Sends the channel's terminal frame (`end`, `shell_closed` or `error`); nothing follows it. */
  end(frame: ChannelEndFrame): void {
    if (this.done) return
    this.#send({ ...frame, ch: this.id })
    this.#ended = true
    this.#fireClose()
  }

  /** Adds credit from the runner. */
  grant(bytes: number): void {
    this.#credit += bytes
    this.#wake()
  }

  /** The socket drained: waiting producers with credit may go on. */
  drained(): void {
    this.#wake()
  }

  /** The runner closed the channel, or the link dropped. */
  close(): void {
    if (this.#closed) return
    this.#closed = true
    this.#uploadEnded = true
    this.#uploadWake?.()
    this.#fireClose()
  }

  /** Calls `fn` each time a paused producer may send again. */
  onResume(fn: () => void): void {
    this.#resume.add(fn)
  }

  /** Calls `fn` once when the channel is finished for any reason. */
  onClose(fn: () => void): void {
    if (this.done) fn()
    else this.#close.add(fn)
  }

  /** Receives an upload chunk from the runner (file writes). */
  pushUpload(chunk: Uint8Array): void {
    this.#upload.push(chunk)
    this.#uploadWake?.()
  }

  /** The runner finished an upload. */
  endUpload(): void {
    this.#uploadEnded = true
    this.#uploadWake?.()
  }

  /** The uploaded chunks, as they arrive, until `endUpload` (or the channel closes). */
  async *uploads(): AsyncGenerator<Uint8Array> {
    for (;;) {
      const chunk = this.#upload.shift()
      if (chunk) {
        yield chunk
        continue
      }
      if (this.#uploadEnded) return
      await new Promise<void>((resolve) => {
        this.#uploadWake = resolve
      })
      this.#uploadWake = undefined
    }
  }

  #wake(): void {
    if (!this.#waiting || this.#credit <= 0 || this.done) return
    this.#waiting = false
    for (const fn of this.#resume) fn()
  }

  #fireClose(): void {
    const listeners = [...this.#close]
    this.#close.clear()
    this.#resume.clear()
    for (const fn of listeners) fn()
  }
}
