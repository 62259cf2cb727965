// One numbered stream on the link, with credit-based flow control; the same class at both ends.
//
// Credit: a sender may have `sendWindow` payload bytes unacknowledged; the receiver returns
// credit (`credit` frames, batched) as its consumer hands bytes on with `release`. A sender
// sends while it has credit left, so one frame may overshoot the window by at most one chunk;
// a peer that sends more than its window plus one chunk beyond what this end released is cut
// off: the channel sends its abort frame, and its consumer gets the failure event. A direction
// whose window is null is held back by the link's buffer only (the runner's file uploads, which
// link 2 agents do not acknowledge), until `limitSends` puts it under credit.
//
// Lifecycle: a channel is done after exactly one of: a terminal frame from the peer (handed to
// the consumer last), a terminal frame this end sent (`end`), this end giving up (`close`, which
// sends the abort frame), an overrun, or the link's loss (`lost`). Frames for a done channel are
// dropped; `onClose` listeners run once; writers waiting for credit are released.
import type { WireError } from '@conch/protocol'
import { LIMITS } from '@conch/protocol/zod-free'
import { type Payload, payloadBytes } from './frame-codec.ts'
import type { LinkFrame } from './link-endpoint.ts'

/** `F` without its channel number, which the channel fills in (distributes over unions). */
export type WithoutChannel<F> = F extends unknown ? Omit<F, 'ch'> : never

/** A credit frame, which both roles' unions contain (checked by the channel tests). */
export interface CreditFrame {
  /** Discriminator. */
  type: 'credit'
  /** Channel. */
  ch: number
  /** Additional payload bytes the peer may send. */
  bytes: number
}

/** How one end configures its channels. */
export interface LinkChannelOptions<Out extends LinkFrame, In extends LinkFrame> {
  /** The channel number (the runner chooses it). */
  id: number
  /** Writes a frame on the link; false when the link's buffer is full or the link is closed. */
  send: (frame: Out | CreditFrame, payload?: Payload) => boolean
  /** Payload bytes this end may send before it needs credit; null: only the link's buffer holds it back. */
  sendWindow: number | null
  /** Payload bytes the peer may send beyond what this end released; null: not enforced. */
  receiveWindow: number | null
  /** Whether a frame from the peer ends the channel. */
  isTerminal: (frame: In) => boolean
  /**
   * The frame this end sends when it gives up on the channel (`close`, or a peer's overrun, with
   * its error); null sends nothing (the channel is forgotten at this end only).
   */
  abortFrame: (error: WireError | null) => WithoutChannel<Out> | null
  /** The event handed to the consumer when the channel fails at this end (overrun, link lost). */
  failure?: (error: WireError) => In
  /** The channel is done (drop it from the role's table). */
  onFinish?: () => void
  /** The peer overran its window (for the role's log); the channel is cut off after this. */
  onOverrun?: (bytes: number) => void
}

/** A consumer of a channel's frames; `payload` is a view into the link's read buffer. */
export type ChannelHandler<In> = (frame: In, payload: Uint8Array) => void

const EMPTY = new Uint8Array(0)
const NO_HANDLER = (): void => {}

/** The error a channel cut off for overrunning its window reports. */
export const OVERRUN_ERROR: WireError = {
  code: 'INVALID_FRAME',
  message: 'the peer sent more than the flow-control window allows; the channel was closed',
}

/** One flow-controlled channel: `Out` frames this end sends, `In` frames the peer sends. */
export class LinkChannel<Out extends LinkFrame, In extends LinkFrame> {
  /** The channel number. */
  readonly id: number
  readonly #options: LinkChannelOptions<Out, In>
  #handler: ChannelHandler<In> | null = null
  #backlog: { frame: In; payload: Uint8Array }[] = []
  #done = false
  #endedByPeer = false
  /** Send credit left; Infinity when sends are not credit-controlled. */
  #credit: number
  #creditControlled: boolean
  #paused = false
  /** Payload bytes received, released and sent back as credit, and released but not sent yet. */
  #received = 0
  #granted = 0
  #unsent = 0
  readonly #creditBatch: number
  readonly #resume = new Set<() => void>()
  readonly #close = new Set<() => void>()

  /** A channel configured by its end of the link. */
  constructor(options: LinkChannelOptions<Out, In>) {
    this.id = options.id
    this.#options = options
    this.#credit = options.sendWindow ?? Number.POSITIVE_INFINITY
    this.#creditControlled = options.sendWindow !== null
    this.#creditBatch = Math.max(1, (options.receiveWindow ?? LIMITS.channelWindowBytes) / 4)
  }

  /** True once the channel has ended, failed or been closed. */
  get done(): boolean {
    return this.#done
  }

  /** True when the peer's terminal frame ended the channel (not this end, a failure or the link's loss). */
  get endedByPeer(): boolean {
    return this.#endedByPeer
  }

  /** Payload bytes received and not yet released. */
  get inFlight(): number {
    return this.#received - this.#granted - this.#unsent
  }

  /** Send credit left (Infinity when sends are not credit-controlled). */
  get credit(): number {
    return this.#credit
  }

  // ---- receiving ----

  /** Takes delivery of frames; frames that arrived earlier are delivered now, in order. */
  consume(handler: ChannelHandler<In>): void {
    this.#handler = handler
    const backlog = this.#backlog
    this.#backlog = []
    for (const { frame, payload } of backlog) handler(frame, payload)
    if (this.#done) this.#handler = NO_HANDLER
  }

  /** A frame from the peer for this channel, routed here by the role. */
  deliver(frame: In | CreditFrame, payload: Uint8Array = EMPTY): void {
    if (this.#done) return
    if (frame.type === 'credit') {
      this.#grant((frame as CreditFrame).bytes)
      return
    }
    const size = payload.byteLength
    if (size > 0) {
      this.#received += size
      const window = this.#options.receiveWindow
      if (window !== null && this.#received - this.#granted > window + LIMITS.maxDataChunkBytes) {
        this.#options.onOverrun?.(this.#received - this.#granted)
        this.#fail(OVERRUN_ERROR, true)
        return
      }
    }
    const event = frame as In
    const terminal = this.#options.isTerminal(event)
    if (terminal) {
      this.#done = true
      this.#endedByPeer = true
    }
    this.#emit(event, payload)
    if (terminal) this.#finish()
  }

  /** Returns `bytes` of credit to the peer (batched into few `credit` frames). */
  release(bytes: number): void {
    if (this.#done || bytes <= 0) return
    this.#unsent += bytes
    if (this.#unsent >= this.#creditBatch) this.flushCredit()
  }

  /** Sends any credit released and not sent yet. */
  flushCredit(): void {
    if (this.#done || this.#unsent <= 0) return
    const bytes = this.#unsent
    this.#granted += bytes
    this.#unsent = 0
    this.#options.send({ type: 'credit', ch: this.id, bytes })
  }

  // ---- sending ----

  /**
   * Puts this end's sends under credit from now on: `window` bytes before the peer returns some.
   * For a channel whose peer says only once it is open that it acknowledges what it takes (a
   * terminal's input, from agents that do); a channel already under credit keeps its own.
   */
  limitSends(window: number): void {
    if (this.#creditControlled || !(window > 0)) return
    this.#creditControlled = true
    this.#credit = window
  }

  /**
   * Sends a frame with a payload under the channel's credit. False means "pause until
   * `onResume`": the credit is used up or the link's buffer is full (or the channel is done).
   */
  sendPayload(frame: WithoutChannel<Out>, payload: Payload): boolean {
    if (this.#done) return false
    this.#credit -= payloadBytes(payload)
    const linkOk = this.#options.send(this.#stamp(frame), payload)
    if (this.#credit > 0 && linkOk) return true
    this.#paused = true
    return false
  }

  /**
   * Waits until the channel may send (credit left, the link's buffer not full), then sends a
   * frame with a payload; resolves false without sending when the channel is done first. Keep
   * payloads at most `LIMITS.maxDataChunkBytes`.
   */
  async write(frame: WithoutChannel<Out>, payload: Uint8Array): Promise<boolean> {
    while (!this.#done && (this.#paused || this.#credit <= 0)) await this.#whenResumed()
    if (this.#done) return false
    this.sendPayload(frame, payload)
    return true
  }

  /** Sends a frame without payload (an event, an upload's end); nothing once the channel is done. */
  send(frame: WithoutChannel<Out>): void {
    if (!this.#done) this.#options.send(this.#stamp(frame))
  }

  /** Sends the channel's terminal frame; nothing follows it. */
  end(frame: WithoutChannel<Out>): void {
    if (this.#done) return
    this.#options.send(this.#stamp(frame))
    this.#finish()
    this.#drop()
  }

  /** Gives up on the channel: sends the abort frame and drops whatever arrives after. */
  close(error: WireError | null = null): void {
    if (this.#done) return
    this.#abort(error)
    this.#finish()
    this.#drop()
  }

  /** The link is gone: the consumer gets the failure event, listeners their close. */
  lost(error: WireError): void {
    this.#fail(error, false)
  }

  /** The link's buffer drained: a paused sender with credit may go on. */
  drained(): void {
    this.#wake()
  }

  /** Calls `fn` each time a paused sender may send again. */
  onResume(fn: () => void): void {
    this.#resume.add(fn)
  }

  /** Calls `fn` once when the channel is done for any reason (at once if it is). */
  onClose(fn: () => void): void {
    if (this.#done) fn()
    else this.#close.add(fn)
  }

  #grant(bytes: number): void {
    if (!this.#creditControlled || !(bytes > 0)) return
    this.#credit += bytes
    this.#wake()
  }

  #wake(): void {
    if (!this.#paused || this.#credit <= 0 || this.#done) return
    this.#paused = false
    for (const fn of [...this.#resume]) fn()
  }

  #whenResumed(): Promise<void> {
    if (this.#done) return Promise.resolve()
    this.#paused = true
    return new Promise((resolve) => {
      const go = (): void => {
        this.#resume.delete(go)
        this.#close.delete(go)
        resolve()
      }
      this.#resume.add(go)
      this.#close.add(go)
    })
  }

  #abort(error: WireError | null): void {
    const frame = this.#options.abortFrame(error)
    if (frame !== null) this.#options.send(this.#stamp(frame))
  }

  #stamp(frame: WithoutChannel<Out>): Out {
    return { ...frame, ch: this.id } as unknown as Out
  }

  /** Ends the channel with `error`: cut off (`abort`: the peer overran) or the link lost. */
  #fail(error: WireError, abort: boolean): void {
    if (this.#done) return
    if (abort) {
      this.#abort(error)
      // What the overrunning peer sent and nobody took yet is dropped.
      this.#backlog = []
    }
    this.#done = true
    const failure = this.#options.failure?.(error)
    if (failure !== undefined) this.#emit(failure, EMPTY)
    this.#finish()
  }

  #emit(frame: In, payload: Uint8Array): void {
    if (this.#handler) this.#handler(frame, payload)
    else this.#backlog.push({ frame, payload })
    if (this.#done) this.#handler = NO_HANDLER
  }

  /** Marks the channel done and runs its close listeners once. */
  #finish(): void {
    this.#done = true
    this.#options.onFinish?.()
    const listeners = [...this.#close]
    this.#close.clear()
    this.#resume.clear()
    for (const fn of listeners) fn()
  }

  #drop(): void {
    this.#handler = NO_HANDLER
    this.#backlog = []
  }
}
