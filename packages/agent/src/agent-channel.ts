// The agent's end of a link channel: `@conch/link`'s `LinkChannel` configured for the agent.
//
// The runner opens a channel by naming it in a call (`session.attach`, `exec`, `process.stream`,
// `file.read`, `file.write`, `tcp.connect`, ...). The agent may send `LIMITS.channelWindowBytes`
// of payload beyond the credit the runner granted; `sendPayload` returns false once the window
// is used up or the link's buffer is full, and the producer waits for `onResume`. The runner's
// uploads arrive as `data` frames ended by `end`; the agent returns credit for them with
// `release` as it passes them on (TCP channels). A channel ends with exactly one terminal frame
// (`end`), or when the runner closes it (`close`) or the link drops: producers stop on `onClose`,
// and `endedByPeer` tells the runner's `close` (a graceful end) from a loss (an abort).
import { LinkChannel, type Payload, type WithoutChannel } from '@conch/link'
import type { AgentFrame, HostFrame, StreamName } from '@conch/protocol'
import { LIMITS } from '@conch/protocol/zod-free'

/** Sends a frame on the link; returns false when the socket's buffer is full. */
export type FrameSender = (frame: AgentFrame, payload?: Payload) => boolean

/** A channel's terminal frame, without `ch` (the channel fills it in). */
export type ChannelEndFrame = WithoutChannel<Extract<AgentFrame, { type: 'end' | 'shell_closed' | 'error' }>>

/** A flow-controlled channel to the runner. */
export class AgentChannel extends LinkChannel<AgentFrame, HostFrame> {
  /**
   * Whether every frame sent so far left the process (the kernel took it): views sent as a
   * payload are then read no more. Without a link to ask, never.
   */
  readonly flushed: () => boolean

  /**
   * Channel `id`, writing on the link with `send`; `onFinish` drops it from the connection's
   * table; `flushed` says whether the link's socket holds no unwritten bytes.
   */
  constructor(id: number, send: FrameSender, onFinish?: () => void, flushed: () => boolean = () => false) {
    super({
      id,
      send,
      sendWindow: LIMITS.channelWindowBytes,
      // Runners send file uploads without waiting for credit, and terminal input under the
      // `inputWindow` that `terminal.attach` answers; the agent enforces neither.
      receiveWindow: null,
      isTerminal: (frame) => frame.type === 'close',
      abortFrame: (error) => (error === null ? null : { type: 'error', error }),
      ...(onFinish ? { onFinish } : {}),
    })
    this.flushed = flushed
  }

  /** Sends command output (`shell_out`/`shell_err`); false means "pause until onResume". */
  output(stream: StreamName, id: string | null, offset: number, payload: Uint8Array): boolean {
    return this.sendPayload({ type: stream === 'stdout' ? 'shell_out' : 'shell_err', id, offset }, payload)
  }

  /** Sends bytes that are not command output (a file read); false means "pause until onResume". */
  data(offset: number, payload: Uint8Array): boolean {
    return this.sendPayload({ type: 'data', offset }, payload)
  }

  /** The uploaded chunks, as they arrive, until the runner's `end` (or the channel closes). */
  async *uploads(): AsyncGenerator<Uint8Array> {
    const chunks: Uint8Array[] = []
    let ended = false
    let wake: (() => void) | undefined
    this.consume((frame, payload) => {
      if (frame.type === 'data') chunks.push(payload)
      else if (frame.type === 'end' || frame.type === 'close') ended = true
      wake?.()
    })
    this.onClose(() => {
      ended = true
      wake?.()
    })
    for (;;) {
      const chunk = chunks.shift()
      if (chunk) {
        yield chunk
        continue
      }
      if (ended) return
      await new Promise<void>((resolve) => {
        wake = resolve
      })
      wake = undefined
    }
  }
}
