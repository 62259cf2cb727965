// The runner's end of a link channel: `@conch/link`'s `LinkChannel` configured for the runner.
// The agent sends under credit the runner grants (`channelWindowBytes` in flight at most; more
// cuts the channel off, since the agent shares its sandbox with user code); the runner's
// uploads wait for the agent's credit on TCP channels and for the link's buffer only on file
// and terminal uploads, which agents of link 2 do not acknowledge. A channel ends with exactly
// one terminal event (`shell_closed`, `end` or `error`); the runner gives up with `close`.
import { LinkChannel, type Payload, type PayloadLease } from '@conch/link'
import {
  type AgentData,
  type AgentEnd,
  type AgentScrollbackEnd,
  type AgentShellClosed,
  type AgentShellErr,
  type AgentShellExit,
  type AgentShellOut,
  type AgentShellStart,
  type HostFrame,
  LIMITS,
  type WireError,
} from '@conch/protocol'
import type { FastifyBaseLogger as Logger } from 'fastify'

/** A frame that carries bytes, with its raw payload attached. */
export type WithPayload<F> = F & {
  /** Raw bytes (a view into the link's read buffer). */
  payload: Uint8Array
  /**
   * Set when the read buffer is reused once this is released: a consumer that is done with
   * the payload (and everything it handed it to is) releases it; one that keeps the payload
   * leaves it, and the buffer is not reused.
   */
  lease?: PayloadLease | undefined
}

/** Command output on a channel: `shell_out` or `shell_err`, as on the WebSocket. */
export type ChannelOutput = WithPayload<AgentShellOut> | WithPayload<AgentShellErr>

/**
 * Everything a channel consumer may receive: the agent's channel frames as parsed, byte frames
 * with their payload; `shell_closed`, `end` and `error` are terminal.
 */
export type ChannelEvent =
  | ChannelOutput
  | WithPayload<AgentData>
  | AgentShellStart
  | AgentShellExit
  | AgentScrollbackEnd
  | AgentShellClosed
  | AgentEnd
  | { type: 'error'; ch?: number; error: WireError }

/** A channel on an agent link, as the runner holds it. */
export type RunnerChannel = LinkChannel<HostFrame, ChannelEvent>

/** What a runner channel needs from its link. */
export interface RunnerChannelLink {
  /** Writes a frame; false when the link's buffer is full or the link is closed. */
  send(frame: HostFrame, payload?: Payload): boolean
  /** Drops a finished channel from the link's table. */
  forget(id: number): void
  /** The link's logger; never given payloads. */
  logger: Logger
}

/**
 * A runner channel numbered `id`. `uploadWindow` is the credit its uploads wait for (TCP
 * channels, which the agent acknowledges), or null when only the link's buffer holds them back.
 */
export function runnerChannel(
  link: RunnerChannelLink,
  id: number,
  uploadWindow: number | null,
): RunnerChannel {
  return new LinkChannel<HostFrame, ChannelEvent>({
    id,
    send: (frame, payload) => link.send(frame, payload),
    sendWindow: uploadWindow,
    receiveWindow: LIMITS.channelWindowBytes,
    isTerminal: (event) => event.type === 'shell_closed' || event.type === 'end' || event.type === 'error',
    abortFrame: () => ({ type: 'close' }),
    failure: (error) => ({ type: 'error', error }),
    onFinish: () => link.forget(id),
    onOverrun: () =>
      link.logger.warn({ ch: id }, 'agent exceeded the channel credit window; closing the channel'),
  })
}
