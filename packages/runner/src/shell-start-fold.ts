// A short run's `shell_start` and `shell_exit` reach the runner in one read from the agent (the
// agent sends a run's start lazily, with the next frame). For a client that listed
// `start_in_exit` in its hello, a run's start is held until the end of the tick, and when the
// run's exit comes in the same tick the start goes inside it (`startOffset`): one WebSocket
// message per run instead of two, so one less frame to build, send, parse and check on each
// side. Any other event of the session (output, another run's start or exit, `scrollback_end`,
// `shell_closed`) sends a held start first, so the client sees them in the order they came; the
// end of the tick sends it in the same write as the tick's other frames: the sender's end of the
// tick (its `beforeUncork`) calls `flush`, so a run costs no tick of the fold's own.
import type { ShellFrameSender } from './shell-frame-sender.ts'

/**
 * Where the fold sends its frames: the socket's frame sender, which calls the fold's `flush`
 * at the end of every tick it was asked for with `atEndOfTick`.
 */
export type StartSender = Pick<ShellFrameSender, 'send' | 'atEndOfTick'>

/** Holds one socket's latest run start for its exit; see the file's header. */
export class ShellStartFold {
  readonly #sender: StartSender
  #enabled = false
  /** The link id of the run whose start is held; null when none is. */
  #run: string | null = null
  /** The held start's run id as the client sees it. */
  #id = ''
  /** The held start's log offset. */
  #offset = 0

  /** A fold sending through `sender`; off until `enable()`. */
  constructor(sender: StartSender) {
    this.#sender = sender
  }

  /** The client listed `start_in_exit`: starts may go inside exits from now on. */
  enable(): void {
    this.#enabled = true
  }

  /** Sends the start of link run `run`, shown as `id`, or holds it to the end of the tick. */
  start(run: string, id: string, offset: number): void {
    this.flush()
    if (!this.#enabled) {
      this.#sender.send({ type: 'shell_start', id, offset })
      return
    }
    this.#run = run
    this.#id = id
    this.#offset = offset
    this.#sender.atEndOfTick()
  }

  /**
   * Link run `run` ended: the offset of its held start, which its exit then carries; otherwise
   * undefined, after sending any held start of another run.
   */
  takeFor(run: string): number | undefined {
    if (this.#run === run) {
      this.#run = null
      return this.#offset
    }
    this.flush()
    return undefined
  }

  /** Sends the held start, if any. */
  flush(): void {
    if (this.#run === null) return
    this.#run = null
    this.#sender.send({ type: 'shell_start', id: this.#id, offset: this.#offset })
  }
}
