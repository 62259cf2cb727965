// The runner's client for one agent connection.
//
// One byte stream (Unix socket or vsock) carries length-prefixed frames both ways. The runner
// opens with `hello` carrying a challenge and waits for the agent's `hello`, whose proof shows
// the agent holds this sandbox's link secret; it then answers the agent's challenge with `auth`.
// A peer that cannot prove the secret (another sandbox's agent, anything else on the socket) is
// dropped before any call is sent. Calls carry a numeric id and settle on
// one `result` or `fail`; their results are parsed with the method's schema. Output flows on
// channels the runner numbers: each channel buffers its events until a consumer takes it, ends
// with exactly one terminal event (`closed`, `end` or `error`), and is flow-controlled by
// credit: the agent may have `channelWindowBytes` in flight beyond what the runner granted, and
// the consumer grants credit with `release(n)` as it hands bytes on. Everything the agent sends
// is parsed against the protocol schemas: the agent shares its sandbox with user code.
import type { Duplex } from 'node:stream'
import {
  AGENT_METHODS,
  type AgentClosed,
  type AgentData,
  type AgentEnd,
  AgentFrame,
  type AgentHello,
  type AgentMethod,
  type AgentParams,
  type AgentReplayEnd,
  type AgentResultOf,
  type AgentRunExit,
  type AgentRunStart,
  type AgentSessionClosed,
  assertNever,
  encodeFrame,
  FrameDecoder,
  LIMITS,
  PROTOCOL_VERSION,
  type WireError,
} from '@conch/protocol'
import { checkLinkProof, linkNonce, linkProof } from '@conch/protocol/link-proof'
import type { FastifyBaseLogger as Logger } from 'fastify'
import type { z } from 'zod'
import { RunnerError } from './runner-error.ts'

/** A data event on a channel: the parsed header and its raw payload. */
export interface ChannelData {
  /** Event kind. */
  t: 'data'
  /** The frame header. */
  frame: z.infer<typeof AgentData>
  /** Raw bytes. */
  payload: Uint8Array
}

/** Everything a channel consumer may receive; `closed`, `end` and `error` are terminal. */
export type ChannelEvent =
  | ChannelData
  | { t: 'run_start'; frame: z.infer<typeof AgentRunStart> }
  | { t: 'run_exit'; frame: z.infer<typeof AgentRunExit> }
  | { t: 'replay_end'; frame: z.infer<typeof AgentReplayEnd> }
  | { t: 'closed'; frame: z.infer<typeof AgentClosed> }
  | { t: 'end'; frame: z.infer<typeof AgentEnd> }
  | { t: 'error'; error: WireError }
  | { t: 'credit'; bytes: number }

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

interface Pending {
  method: AgentMethod
  result: z.ZodType
  resolve: (value: unknown) => void
  reject: (error: RunnerError) => void
  timer: NodeJS.Timeout | undefined
}

const CREDIT_BATCH = LIMITS.channelWindowBytes / 4
/** One schema per agent frame type: a frame is parsed against its own type only. */
const FRAME_SCHEMAS: ReadonlyMap<string, z.ZodType<AgentFrame>> = new Map(
  AgentFrame.options.map((o) => [o.shape.t.value, o as z.ZodType<AgentFrame>]),
)
const NO_HANDLER = (): void => {}

/** One multiplexed channel on an agent link. */
export class LinkChannel {
  /** The channel number. */
  readonly id: number
  readonly #link: AgentLink
  #handler: ((event: ChannelEvent) => void) | null = null
  #backlog: ChannelEvent[] = []
  #done = false
  #received = 0
  #granted = 0
  #unsent = 0

  /** Created by `AgentLink.openChannel`. */
  constructor(link: AgentLink, id: number) {
    this.#link = link
    this.id = id
  }

  /** True once the channel has ended (terminal event) or been closed. */
  get done(): boolean {
    return this.#done
  }

  /** Payload bytes received and not yet released. */
  get inFlight(): number {
    return this.#received - this.#granted - this.#unsent
  }

  /** Takes delivery of events; events that arrived earlier are delivered now, in order. */
  consume(handler: (event: ChannelEvent) => void): void {
    this.#handler = handler
    const backlog = this.#backlog
    this.#backlog = []
    for (const event of backlog) handler(event)
  }

  /** Grants the agent `bytes` more credit (batched into few `credit` frames). */
  release(bytes: number): void {
    if (this.#done || bytes <= 0) return
    this.#unsent += bytes
    if (this.#unsent >= CREDIT_BATCH) this.flushCredit()
  }

  /** Sends any credit not sent yet. */
  flushCredit(): void {
    if (this.#done || this.#unsent <= 0) return
    const bytes = this.#unsent
    this.#granted += bytes
    this.#unsent = 0
    this.#link.send({ t: 'credit', ch: this.id, bytes })
  }

  /** Sends upload bytes (file writes); resolves when the link can take more. */
  write(payload: Uint8Array): Promise<void> {
    return this.#link.sendWithBackpressure({ t: 'data', ch: this.id }, payload)
  }

  /** Ends an upload channel. */
  end(): void {
    if (!this.#done) this.#link.send({ t: 'end', ch: this.id })
  }

  /** Tells the agent the runner no longer wants this channel (detaches; never kills anything). */
  close(): void {
    if (this.#done) return
    this.#done = true
    this.#link.send({ t: 'close', ch: this.id })
    this.#link.forget(this.id)
    this.#handler = null
    this.#backlog = []
  }

  /** Delivers an event from the link; a channel that overruns its credit window is closed with an error. */
  deliver(event: ChannelEvent): void {
    if (this.#done) return
    if (event.t === 'data') {
      this.#received += event.payload.byteLength
      if (this.#received - this.#granted > LIMITS.channelWindowBytes + LIMITS.maxDataChunkBytes) {
        this.#link.logger.warn(
          { ch: this.id },
          'agent exceeded the channel credit window; closing the channel',
        )
        const handler = this.#handler
        this.close()
        handler?.({
          t: 'error',
          error: {
            code: 'INVALID_FRAME',
            message: 'the agent sent more output than the flow-control window allows',
          },
        })
        return
      }
    }
    const terminal = event.t === 'closed' || event.t === 'end' || event.t === 'error'
    if (terminal) {
      this.#done = true
      this.#link.forget(this.id)
    }
    this.#emit(event)
  }

  #emit(event: ChannelEvent): void {
    if (this.#handler) this.#handler(event)
    else this.#backlog.push(event)
    if (this.#done) this.#handler = NO_HANDLER
  }
}

/** A connection to one agent. Create it with `AgentLink.open(stream, options)`. */
export class AgentLink {
  /** The agent's hello (pid, version, start time). */
  hello: AgentHelloInfo | null = null
  /** The link's logger. */
  readonly logger: Logger
  readonly #stream: Duplex
  readonly #decoder = new FrameDecoder()
  readonly #pending = new Map<number, Pending>()
  readonly #channels = new Map<number, LinkChannel>()
  readonly #events: AgentLinkEvents = {}
  readonly #onBytes: (n: number) => void
  #nextCall = 1
  #nextChannel = 1
  #closed: RunnerError | null = null
  #heartbeat: NodeJS.Timeout | undefined
  #pingOutstanding = 0
  #pingSeq = 0
  #helloWaiter: ((hello: AgentHelloInfo) => void) | null = null
  #corked = false
  readonly #uncork = (): void => {
    this.#corked = false
    this.#stream.uncork()
  }

  private constructor(stream: Duplex, options: AgentLinkOptions) {
    this.#stream = stream
    this.logger = options.logger
    this.#onBytes = options.onBytes ?? NO_HANDLER
    stream.on('data', (chunk: Buffer) => this.#onChunk(chunk))
    stream.on('error', (error) =>
      this.#fail(new RunnerError('CONNECTION_LOST', `agent link failed: ${error.message}`)),
    )
    stream.on('close', () => this.#fail(new RunnerError('CONNECTION_LOST', 'the agent closed the link')))
    const interval = options.heartbeatIntervalMs ?? LIMITS.heartbeatIntervalMs
    this.#heartbeat = setInterval(() => this.#beat(), interval)
    this.#heartbeat.unref()
  }

  /** Sends `hello` on `stream` and resolves once the agent answers with a compatible hello. */
  static async open(stream: Duplex, options: AgentLinkOptions): Promise<AgentLink> {
    const link = new AgentLink(stream, options)
    const timeoutMs = options.helloTimeoutMs ?? 10_000
    const nonce = linkNonce()
    try {
      link.hello = await new Promise<AgentHelloInfo>((resolve, reject) => {
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
        link.send({ t: 'hello', protocolVersion: PROTOCOL_VERSION, nonce })
      })
    } catch (error) {
      link.close()
      throw error
    }
    link.#events.close = undefined
    if (link.hello.protocolVersion !== PROTOCOL_VERSION) {
      link.close()
      throw new RunnerError(
        'UNSUPPORTED_PROTOCOL_VERSION',
        `the agent speaks protocol ${link.hello.protocolVersion}; this runner speaks ${PROTOCOL_VERSION}`,
      )
    }
    if (!checkLinkProof(options.secret, 'agent', nonce, link.hello.proof)) {
      link.close()
      throw new RunnerError(
        'AGENT_UNAVAILABLE',
        "the process on the agent socket could not prove it is this sandbox's agent; the sandbox cannot be reached",
      )
    }
    link.send({ t: 'auth', proof: linkProof(options.secret, 'runner', link.hello.nonce) })
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
    if (this.#closed) return Promise.reject(this.#closed)
    const id = this.#nextCall++
    return new Promise<AgentResultOf<M>>((resolve, reject) => {
      const timer =
        options.timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              this.#pending.delete(id)
              reject(
                new RunnerError(
                  'DEADLINE_EXCEEDED',
                  `the agent did not answer ${method} within ${options.timeoutMs} ms`,
                ),
              )
            }, options.timeoutMs)
      const result = options.result ?? AGENT_METHODS[method].result
      this.#pending.set(id, { method, result, resolve: resolve as (v: unknown) => void, reject, timer })
      this.send({ t: 'call', id, method, params })
    })
  }

  /** Allocates a channel; pass its `id` to the method that streams on it. */
  openChannel(): LinkChannel {
    const id = this.#nextChannel++
    if (this.#nextChannel > 2 ** 31) this.#nextChannel = 1
    const channel = new LinkChannel(this, id)
    this.#channels.set(id, channel)
    if (this.#closed) channel.deliver({ t: 'error', error: this.#closed.toWire() })
    return channel
  }

  /** Writes one frame (no-op after close). */
  send(header: unknown, payload?: Uint8Array): void {
    if (this.#closed) return
    this.#write(encodeFrame(header, payload))
  }

  /** Writes one frame and resolves when the stream has room for more. */
  sendWithBackpressure(header: unknown, payload: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closed)
    if (this.#write(encodeFrame(header, payload))) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const onDrain = (): void => {
        this.#stream.off('close', onClose)
        resolve()
      }
      const onClose = (): void => {
        this.#stream.off('drain', onDrain)
        reject(this.#closed ?? new RunnerError('CONNECTION_LOST', 'the agent link closed'))
      }
      this.#stream.once('drain', onDrain)
      this.#stream.once('close', onClose)
    })
  }

  /**
   * Frames written in one tick (the calls of pipelined runs, credit) leave in one write: the
   * stream is corked on the first write of a tick and uncorked on the next.
   */
  #write(frame: Uint8Array): boolean {
    if (!this.#corked) {
      this.#corked = true
      this.#stream.cork()
      process.nextTick(this.#uncork)
    }
    return this.#stream.write(frame)
  }

  /** Drops a finished channel from the table. */
  forget(id: number): void {
    this.#channels.delete(id)
  }

  /** Closes the link; calls and channels fail with CONNECTION_LOST. The agent keeps running. */
  close(): void {
    this.#fail(new RunnerError('CONNECTION_LOST', 'the runner closed the agent link'))
  }

  #onChunk(chunk: Buffer): void {
    const results = this.#decoder.push(chunk)
    for (const result of results) {
      if (!result.ok) {
        this.logger.warn(
          { code: result.error.code },
          `dropped a bad frame from the agent: ${result.error.message}`,
        )
        continue
      }
      this.#onFrame(result.frame.header, result.frame.payload)
      if (this.#closed) return
    }
  }

  #onFrame(header: unknown, payload: Uint8Array): void {
    const kind = typeof header === 'object' && header !== null ? (header as { t?: unknown }).t : undefined
    const schema = typeof kind === 'string' ? FRAME_SCHEMAS.get(kind) : undefined
    if (!schema) {
      this.logger.warn({ t: String(kind).slice(0, 32) }, 'unknown frame type from the agent; ignored')
      return
    }
    const parsed = schema.safeParse(header)
    if (!parsed.success) {
      this.#bad(String(kind), parsed.error)
      return
    }
    this.#dispatch(parsed.data, payload)
  }

  #dispatch(frame: AgentFrame, payload: Uint8Array): void {
    switch (frame.t) {
      case 'data':
        this.#onBytes(payload.byteLength)
        this.#toChannel(frame.ch, { t: 'data', frame, payload })
        return
      case 'result': {
        const pending = this.#settle(frame.id)
        if (!pending) return
        const parsed = pending.result.safeParse(frame.result)
        if (parsed.success) pending.resolve(parsed.data)
        else {
          this.logger.warn(
            { method: pending.method, fields: parsed.error.issues.slice(0, 3).map((i) => i.path.join('.')) },
            'invalid result from the agent',
          )
          pending.reject(
            new RunnerError('INTERNAL', `the agent sent an invalid result for ${pending.method}`),
          )
        }
        return
      }
      case 'fail':
        this.#settle(frame.id)?.reject(RunnerError.fromWire(frame.error))
        return
      case 'run_start':
        this.#toChannel(frame.ch, { t: 'run_start', frame })
        return
      case 'run_exit':
        this.#toChannel(frame.ch, { t: 'run_exit', frame })
        return
      case 'replay_end':
        this.#toChannel(frame.ch, { t: 'replay_end', frame })
        return
      case 'closed':
        this.#toChannel(frame.ch, { t: 'closed', frame })
        return
      case 'end':
        this.#toChannel(frame.ch, { t: 'end', frame })
        return
      case 'error':
        if (frame.ch === undefined) {
          this.logger.warn({ code: frame.error.code }, `agent reported: ${frame.error.message}`)
          return
        }
        this.#toChannel(frame.ch, { t: 'error', error: frame.error })
        return
      case 'session_closed':
        this.#events.sessionClosed?.(frame)
        return
      case 'credit':
        this.#toChannel(frame.ch, { t: 'credit', bytes: frame.bytes })
        return
      case 'ping':
        this.send({ t: 'pong', n: frame.n })
        return
      case 'pong':
        this.#pingOutstanding = 0
        return
      case 'hello':
        this.#helloWaiter?.(frame)
        this.#helloWaiter = null
        return
      default:
        assertNever(frame)
    }
  }

  #bad(kind: string, error: z.ZodError): void {
    this.logger.warn(
      { t: kind, issues: error.issues.slice(0, 3).map((i) => i.path.join('.')) },
      'invalid frame from the agent; ignored',
    )
  }

  #toChannel(ch: number, event: ChannelEvent): void {
    const channel = this.#channels.get(ch)
    if (channel) channel.deliver(event)
  }

  #settle(id: number): Pending | undefined {
    const pending = this.#pending.get(id)
    if (!pending) return undefined
    this.#pending.delete(id)
    if (pending.timer) clearTimeout(pending.timer)
    return pending
  }

  #beat(): void {
    if (this.#pingOutstanding >= 2) {
      this.#fail(new RunnerError('CONNECTION_LOST', 'the agent stopped answering heartbeats'))
      return
    }
    this.#pingOutstanding += 1
    this.send({ t: 'ping', n: ++this.#pingSeq })
  }

  #fail(error: RunnerError): void {
    if (this.#closed) return
    this.#closed = error
    clearInterval(this.#heartbeat)
    this.#stream.destroy()
    for (const pending of this.#pending.values()) {
      if (pending.timer) clearTimeout(pending.timer)
      pending.reject(error)
    }
    this.#pending.clear()
    for (const channel of [...this.#channels.values()]) channel.deliver({ t: 'error', error: error.toWire() })
    this.#channels.clear()
    this.#events.close?.(error)
  }
}
