// One runner connection on the agent's link socket: the proof handshake, then calls and channels.
//
// A connection first proves it holds the sandbox's link secret (see
// `@conch/protocol/link-proof`): the runner's hello carries a challenge the agent answers, and
// the runner's `auth` answers the agent's. A runner of another link version gets this agent's
// hello (so it can name the mismatch) but never gets past `auth`. Anything else first, or a bad
// frame first, drops the connection. Once authenticated, every incoming frame is decoded with
// the length-prefixed codec and parsed against `HostFrame` and the called method's params schema
// (by the zod-free checker of the JSON Schema generated from them: `@conch/protocol/zod-free`,
// so zod is not in the agent); a bad frame gets an `error` frame (or a `fail` for a call with an
// id) and the agent keeps serving. The link is hostile input: user code runs next to the agent.
// Which connection is the live one, and what the calls do, is the server's (agent-server.ts).
import type { Socket } from 'node:net'
import {
  answerCall,
  type CallAnswer,
  type CallFrame,
  type CallParser,
  LinkEndpoint,
  type Payload,
} from '@conch/link'
import type {
  AGENT_METHODS,
  AgentFrame,
  AgentMethod,
  AgentParams,
  AgentResultOf,
  HostFrame,
  WireError,
} from '@conch/protocol'
import { checkLinkProof, linkNonce, linkProof } from '@conch/protocol/link-proof'
import {
  isAgentMethodName,
  LIMITS,
  LINK_VERSION,
  parseAgentParams,
  parseHostFrame,
} from '@conch/protocol/zod-free'
import { AgentChannel } from './agent-channel.ts'
import { toWireError } from './agent-error.ts'
import { AGENT_VERSION } from './agent-version.ts'
import { RunFramePacing } from './run-frame-pacing.ts'
import type { MethodContext } from './session-service.ts'

/** What a connection asks of the server that accepted it. */
export interface ConnectionHost {
  /** Logs a failed handshake; called by a connection before it drops itself. */
  rejected(reason: string): void
  /** Runs one call whose params were parsed against the method's schema (its result, or a promise of it). */
  dispatch<M extends AgentMethod>(
    method: M,
    params: AgentParams<M>,
    context: MethodContext,
  ): CallAnswer<AgentResultOf<M>>
}

/** One runner connection: the handshake, calls and channels, over a link endpoint. */
export class RunnerConnection {
  readonly #endpoint: LinkEndpoint<AgentFrame, HostFrame>
  readonly #host: ConnectionHost
  readonly #channels = new Map<number, AgentChannel>()
  readonly #context: MethodContext
  readonly #secret: string
  /** The challenge this agent sent in its hello; null until the runner's hello arrived. */
  #nonce: string | null = null
  /** The runner's link version when it is not this agent's; such a runner is never authenticated. */
  #foreignLink: number | null = null
  #authenticated = false
  #onAuthenticated: () => void = () => {}
  readonly #pacing = new RunFramePacing()
  /** Whether the socket holds no unwritten bytes: the kernel took every frame sent so far. */
  readonly #flushed: () => boolean

  /** Serves `socket`, which must prove `secret` before any call is answered. */
  constructor(socket: Socket, host: ConnectionHost, secret: string) {
    this.#host = host
    this.#secret = secret
    this.#context = { channel: (ch) => this.#channel(ch) }
    this.#flushed = () => socket.writableLength === 0
    this.#endpoint = new LinkEndpoint<AgentFrame, HostFrame>(socket, {
      parse: parseHostFrame,
      maxFrameBytes: LIMITS.maxAgentFrameBytes,
      onFrame: (frame, payload) => this.#receive(frame, payload),
      onBadFrame: (error, header) => this.#badFrame(error, header),
      onDrain: () => {
        for (const channel of this.#channels.values()) channel.drained()
      },
      onClose: (reason) => {
        const error = { code: 'CONNECTION_LOST' as const, message: `the runner link closed: ${reason}` }
        for (const channel of [...this.#channels.values()]) channel.lost(error)
        this.#channels.clear()
      },
    })
  }

  /**
   * Sends one frame; false when the socket's buffer is full. A run's start goes lazily unless
   * its run has a stdin pipe (run-frame-pacing.ts).
   */
  send(frame: AgentFrame, payload?: Payload): boolean {
    return this.#endpoint.send(frame, payload, this.#pacing.frameIsLazy(frame))
  }

  /** Drops the connection. */
  destroy(): void {
    this.#endpoint.close()
  }

  /** Called once the peer proved the link secret. */
  onAuthenticated(handler: () => void): void {
    this.#onAuthenticated = handler
  }

  /** Handles a frame before the peer proved the secret: only hello, then auth. */
  #handshake(frame: HostFrame): void {
    if (frame.type === 'hello' && this.#nonce === null) {
      this.#nonce = linkNonce()
      if (frame.linkVersion !== LINK_VERSION) this.#foreignLink = frame.linkVersion
      this.send({
        type: 'hello',
        linkVersion: LINK_VERSION,
        agentVersion: AGENT_VERSION,
        pid: process.pid,
        startedAt: Math.floor(performance.timeOrigin),
        nonce: this.#nonce,
        proof: linkProof(this.#secret, 'agent', frame.nonce),
      })
      return
    }
    if (frame.type === 'auth' && this.#foreignLink !== null) {
      this.#host.rejected(
        `the runner speaks link protocol ${this.#foreignLink}; this agent speaks ${LINK_VERSION}`,
      )
    } else if (frame.type === 'auth' && this.#nonce !== null) {
      if (checkLinkProof(this.#secret, 'runner', this.#nonce, frame.proof)) {
        this.#authenticated = true
        this.#endpoint.live()
        this.#onAuthenticated()
        return
      }
      this.#host.rejected('wrong proof')
    } else {
      this.#host.rejected(`"${frame.type}" before the handshake finished`)
    }
    this.#endpoint.close('handshake failed')
  }

  #channel(ch: number): AgentChannel {
    let channel = this.#channels.get(ch)
    if (!channel) {
      const opened: AgentChannel = new AgentChannel(
        ch,
        (h, p) => this.send(h, p),
        () => {
          if (this.#channels.get(ch) === opened) this.#channels.delete(ch)
        },
        this.#flushed,
      )
      channel = opened
      this.#channels.set(ch, channel)
    }
    return channel
  }

  /** An undecodable or invalid frame: fatal before the handshake, answered after it. */
  #badFrame(error: WireError, header: unknown): void {
    if (!this.#authenticated) {
      this.#host.rejected(
        header === undefined
          ? 'an undecodable frame before the handshake finished'
          : `an invalid frame before the handshake finished: ${error.message}`,
      )
      this.#endpoint.close('bad frame before the handshake')
      return
    }
    const id = callId(header)
    this.send(id === undefined ? { type: 'error', error } : { type: 'fail', id, error })
  }

  #receive(frame: HostFrame, payload: Uint8Array): void {
    if (!this.#authenticated) {
      this.#handshake(frame)
      return
    }
    switch (frame.type) {
      case 'hello':
      case 'auth':
        this.send({
          type: 'error',
          error: { code: 'BAD_REQUEST', message: `"${frame.type}" is only valid once, at the start` },
        })
        break
      case 'call':
        this.#call(frame)
        break
      case 'credit':
      case 'close':
      case 'data':
      case 'end':
        this.#channels.get(frame.ch)?.deliver(frame, payload)
        break
      case 'ping':
      case 'pong':
        // The endpoint answers heartbeats once the link is live.
        break
    }
  }

  #call(frame: CallFrame): void {
    // A streamed run's `{}` only says it was queued; nobody waits for it (a failure still
    // leaves at once).
    const run = this.#pacing.called(frame)
    answerCall(
      CALLS,
      frame,
      (method, params) => this.#host.dispatch(method, params, this.#context),
      (answer) => this.#endpoint.send(answer, undefined, this.#pacing.answerIsLazy(run, answer)),
      toWireError,
    )
  }
}

/** The agent's calls, checked by the zod-free parsers of `AGENT_METHODS`' params. */
const CALLS: CallParser<typeof AGENT_METHODS> = { has: isAgentMethodName, params: parseAgentParams }

function callId(header: unknown): number | undefined {
  if (typeof header !== 'object' || header === null || !('id' in header)) return undefined
  const id = header.id
  return typeof id === 'number' && Number.isInteger(id) && id >= 0 ? id : undefined
}
