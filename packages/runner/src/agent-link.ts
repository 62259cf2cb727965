// The runner's client for one agent connection.
//
// One byte stream (Unix socket or vsock) carries length-prefixed frames both ways. The runner
// opens with `hello` carrying a challenge and waits for the agent's `hello`, whose proof shows
// the agent holds this sandbox's link secret; it then answers the agent's challenge with `auth`.
// A peer that cannot prove the secret (another sandbox's agent, anything else on the socket) is
// dropped before any call is sent. An agent that proves it but speaks another link version (an
// older conch's agent, whose hello is discriminated on `t`) fails the handshake with
// UNSUPPORTED_PROTOCOL_VERSION, which marks its sandbox dead. Calls carry a numeric id and settle on
// one `result` or `fail`; their results are parsed with the method's schema. Output flows on
// channels the runner numbers (`runner-channel.ts`: `@conch/link`'s credit-based channel).
// Everything the agent sends is parsed against the protocol schemas (`agent-frame-parser.ts`):
// the agent shares its sandbox with user code.
import type { Duplex } from 'node:stream'
import { LinkCalls, LinkEndpoint, type Payload, type PayloadLease } from '@conch/link'
import {
  AGENT_METHODS,
  type AgentFrame,
  type AgentHello,
  type AgentMethod,
  type AgentParams,
  type AgentResultOf,
  type AgentSessionClosed,
  assertNever,
  type ErrorCode,
  type HostFrame,
  isLinkHello,
  LIMITS,
  LINK_VERSION,
  linkVersionOf,
  PROTOCOL_VERSION,
  type WireError,
} from '@conch/protocol'
import { checkLinkProof, linkNonce, linkProof } from '@conch/protocol/link-proof'
import type { FastifyBaseLogger as Logger } from 'fastify'
import type { z } from 'zod'
import { parseAgentFrame } from './agent-frame-parser.ts'
import { readAgentHeader } from './agent-header-reader.ts'
import { linkMismatch } from './link-mismatch.ts'
import { type ChannelEvent, type RunnerChannel, runnerChannel, type WithPayload } from './runner-channel.ts'
import { RunnerError } from './runner-error.ts'

/** Options of an agent link. */
export interface AgentLinkOptions {
  /** Logger; never given payloads. */
  logger: Logger
  /** Interval of link heartbeats; a link without a pong for two intervals is dropped. */
  heartbeatIntervalMs?: number
  /** How long to wait for the agent's hello. */
  helloTimeoutMs?: number
  /** The sandbox's link secret, which the agent must prove it holds. */
  secret: string
  /** Called for every byte of channel payload received (metrics). */
  onBytes?: (n: number) => void
}

/** The agent's `hello`. */
export type AgentHelloInfo = z.infer<typeof AgentHello>

/** What the handshake reads from an agent's first answer: its link version and proof. */
interface HelloAnswer {
  linkVersion: number
  proof: unknown
  hello: AgentHelloInfo | null
}

/** Handlers for the link's own events. */
export interface AgentLinkEvents {
  /** A session's bash ended (sent once by the agent, attached or not). */
  sessionClosed?: (frame: z.infer<typeof AgentSessionClosed>) => void
  /** The link is gone; every call and channel has failed with CONNECTION_LOST. */
  close?: (error: RunnerError) => void
}

/** Options of one call. */
export interface CallOptions<M extends AgentMethod> {
  /** Reject with DEADLINE_EXCEEDED when the agent has not answered in this time. */
  timeoutMs?: number
  /** A narrower result schema than the method's (e.g. `{}` for a run that streams). */
  result?: z.ZodType<AgentResultOf<M>>
}

const CALL_ERRORS = {
  make: (code: ErrorCode, message: string) => new RunnerError(code, message),
  fromWire: (error: WireError) => RunnerError.fromWire(error),
}

const NO_HANDLER = (): void => {}

/** A connection to one agent. Create it with `AgentLink.open(stream, options)`. */
export class AgentLink {
  /** The agent's hello (pid, version, start time). */
  hello: AgentHelloInfo | null = null
  /** The link's logger. */
  readonly logger: Logger
  readonly #endpoint: LinkEndpoint<HostFrame, AgentFrame>
  readonly #calls: LinkCalls<typeof AGENT_METHODS>
  readonly #channels = new Map<number, RunnerChannel>()
  readonly #events: AgentLinkEvents = {}
  readonly #onBytes: (n: number) => void
  #nextChannel = 1
  #closed: RunnerError | null = null
  #helloWaiter: ((answer: HelloAnswer) => void) | null = null

  private constructor(stream: Duplex, options: AgentLinkOptions) {
    this.logger = options.logger
    this.#onBytes = options.onBytes ?? NO_HANDLER
    this.#endpoint = new LinkEndpoint<HostFrame, AgentFrame>(stream, {
      readHeader: readAgentHeader,
      parse: parseAgentFrame,
      onFrame: (frame, payload, lease) => this.#dispatch(frame, payload, lease),
      onBadFrame: (error, header) => this.#bad(header, error),
      onDrain: () => {
        for (const channel of this.#channels.values()) channel.drained()
      },
      onClose: (reason) =>
        this.#fail(
          new RunnerError(
            'CONNECTION_LOST',
            reason === 'the peer closed the link' ? 'the agent closed the link' : `agent link: ${reason}`,
          ),
        ),
    })
    this.#heartbeatIntervalMs = options.heartbeatIntervalMs ?? LIMITS.heartbeatIntervalMs
    this.#calls = new LinkCalls(AGENT_METHODS, (frame) => this.send(frame), CALL_ERRORS)
  }

  readonly #heartbeatIntervalMs: number

  /**
   * Sends `hello` on `stream` and resolves once the agent answers with a hello of this link
   * version that proves the sandbox's secret. An agent that proves it but speaks another link
   * version rejects with UNSUPPORTED_PROTOCOL_VERSION (see `linkMismatch`).
   */
  static async open(stream: Duplex, options: AgentLinkOptions): Promise<AgentLink> {
    const link = new AgentLink(stream, options)
    const timeoutMs = options.helloTimeoutMs ?? 10_000
    const nonce = linkNonce()
    let answer: HelloAnswer
    try {
      answer = await new Promise<HelloAnswer>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new RunnerError('AGENT_UNAVAILABLE', `the agent did not answer hello within ${timeoutMs} ms`),
            ),
          timeoutMs,
        )
        link.#helloWaiter = (hello) => {
          clearTimeout(timer)
          resolve(hello)
        }
        link.#events.close = (error) => {
          clearTimeout(timer)
          reject(error)
        }
        // `t` and `protocolVersion` let an agent of link 1 read this hello and answer.
        link.send({
          type: 'hello',
          t: 'hello',
          linkVersion: LINK_VERSION,
          protocolVersion: PROTOCOL_VERSION,
          nonce,
        })
      })
    } catch (error) {
      link.close()
      throw error
    }
    link.#events.close = undefined
    // The proof first: only this sandbox's own agent may have its sandbox reported dead.
    if (typeof answer.proof !== 'string' || !checkLinkProof(options.secret, 'agent', nonce, answer.proof)) {
      link.close()
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        "the process on the agent socket could not prove it is this sandbox's agent; the sandbox cannot be reached",
      )
    }
    if (answer.linkVersion !== LINK_VERSION || answer.hello === null) {
      link.close()
      throw linkMismatch(answer.linkVersion)
    }
    link.hello = answer.hello
    link.send({ type: 'auth', proof: linkProof(options.secret, 'runner', answer.hello.nonce) })
    link.#endpoint.live(link.#heartbeatIntervalMs)
    return link
  }

  /** True until the link closes. */
  get open(): boolean {
    return this.#closed === null
  }

  /** Sets the handlers for session closes and link loss. */
  on(events: AgentLinkEvents): void {
    Object.assign(this.#events, events)
  }

  /** Calls an agent method; resolves with its parsed result, rejects with the agent's error. */
  call<M extends AgentMethod>(
    method: M,
    params: AgentParams<M>,
    options: CallOptions<M> = {},
  ): Promise<AgentResultOf<M>> {
    return this.#calls.call(method, params, options)
  }

  /**
   * Calls an agent method without a promise, for calls whose answer only acknowledges (a
   * streamed run): the result is checked and dropped; `onFail` gets the agent's error, an
   * invalid result (INTERNAL) or the link's loss, at most once, with `context` (so one
   * `onFail` serves every call, without a closure per call).
   */
  callUnawaited<M extends AgentMethod, C = undefined>(
    method: M,
    params: AgentParams<M>,
    onFail: (error: Error, context: C) => void,
    options: CallOptions<M> = {},
    context?: C,
  ): void {
    this.#calls.callUnawaited(method, params, onFail, options, context)
  }

  /**
   * Allocates a channel; pass its `id` to the method that streams on it. `uploadWindow` is the
   * credit its uploads wait for when the agent acknowledges them (TCP channels); without it
   * only the link's buffer holds uploads back.
   */
  openChannel(uploadWindow: number | null = null): RunnerChannel {
    const id = this.#nextChannel++
    if (this.#nextChannel > 2 ** 31) this.#nextChannel = 1
    const channel = runnerChannel(this, id, uploadWindow)
    this.#channels.set(id, channel)
    if (this.#closed) channel.lost(this.#closed.toWire())
    return channel
  }

  /** Writes one frame; false after close or when the link's buffer is full. */
  send(frame: HostFrame, payload?: Payload): boolean {
    if (this.#closed) return false
    return this.#endpoint.send(frame, payload)
  }

  /** Drops a finished channel from the table. */
  forget(id: number): void {
    this.#channels.delete(id)
  }

  /** Closes the link; calls and channels fail with CONNECTION_LOST. The agent keeps running. */
  close(): void {
    this.#fail(new RunnerError('CONNECTION_LOST', 'the runner closed the agent link'))
  }

  #dispatch(frame: AgentFrame, payload: Uint8Array, lease: PayloadLease | undefined): void {
    switch (frame.type) {
      case 'shell_out':
      case 'shell_err':
      case 'data': {
        this.#onBytes(payload.byteLength)
        // The parsed header is a fresh object: the payload rides on it rather than on a wrapper.
        const event = frame as WithPayload<typeof frame>
        event.payload = payload
        event.lease = lease
        this.#channels.get(frame.ch)?.deliver(event as ChannelEvent, payload)
        return
      }
      case 'result':
      case 'fail': {
        const invalid = this.#calls.settle(frame)
        if (invalid)
          this.logger.warn(
            { method: invalid.method, fields: invalid.issues },
            'invalid result from the agent',
          )
        return
      }
      case 'shell_start':
      case 'shell_exit':
      case 'scrollback_end':
      case 'shell_closed':
      case 'end':
        this.#channels.get(frame.ch)?.deliver(frame)
        return
      case 'error':
        if (frame.ch === undefined) {
          this.logger.warn({ code: frame.error.code }, `agent reported: ${frame.error.message}`)
          return
        }
        this.#channels.get(frame.ch)?.deliver(frame)
        return
      case 'session_closed':
        this.#events.sessionClosed?.(frame)
        return
      case 'credit':
        this.#channels.get(frame.ch)?.deliver(frame)
        return
      case 'ping':
      case 'pong':
        // Answered by the endpoint once the link is live; before the hello they mean nothing.
        return
      case 'hello':
        this.#helloWaiter?.({ linkVersion: frame.linkVersion, proof: frame.proof, hello: frame })
        this.#helloWaiter = null
        return
      default:
        assertNever(frame)
    }
  }

  #bad(header: unknown, error: WireError): void {
    // A hello this link cannot parse may still name its link version (link 1's, on `t`).
    const version = this.#helloWaiter && isLinkHello(header) ? linkVersionOf(header) : null
    if (this.#helloWaiter && version !== null && version !== LINK_VERSION) {
      const { proof } = header as { proof?: unknown }
      this.#helloWaiter({ linkVersion: version, proof, hello: null })
      this.#helloWaiter = null
      return
    }
    const kind =
      typeof header === 'object' && header !== null ? (header as { type?: unknown }).type : undefined
    this.logger.warn(
      { type: String(kind).slice(0, 32), code: error.code },
      `dropped a bad frame from the agent: ${error.message.slice(0, 200)}`,
    )
  }

  #fail(error: RunnerError): void {
    if (this.#closed) return
    this.#closed = error
    this.#endpoint.close(error.message)
    this.#calls.failAll(error)
    const wire = error.toWire()
    for (const channel of [...this.#channels.values()]) channel.lost(wire)
    this.#channels.clear()
    this.#events.close?.(error)
  }
}
