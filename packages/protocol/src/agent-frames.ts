import { z } from 'zod'
import { WireError } from './error-codes.ts'
import { Offset, RunId, SessionId, StreamName } from './primitives.ts'

// Frames on the runner↔agent link: one byte stream (Unix socket or vsock), framed by
// `frame-codec.ts` as a JSON header plus an optional raw payload. The link is multiplexed:
// requests carry a numeric `id` and get exactly one `result` or `fail`; streams of output flow
// on numbered channels (`ch`) that the runner opens, and each channel ends with exactly one
// terminal frame (`end`, `closed` or `error`). Flow control is per channel: the agent sends at
// most `LIMITS.channelWindowBytes` of payload beyond the credit the runner has granted.

/** A channel number, chosen by the runner, unique on one connection. */
export const ChannelId = z
  .number()
  .int()
  .nonnegative()
  .max(2 ** 31)

/** A link challenge: 32 random bytes as 64 lowercase hex digits. */
export const LinkNonce = z.string().regex(/^[0-9a-f]{64}$/, 'a link nonce is 64 lowercase hex digits')

/** A link proof: HMAC-SHA256 of the peer's challenge under the sandbox's link secret, in hex. */
export const LinkProof = z.string().regex(/^[0-9a-f]{64}$/, 'a link proof is 64 lowercase hex digits')

/** runner → agent: first frame on a connection; carries the runner's challenge. */
export const HostHello = z.object({
  t: z.literal('hello'),
  /** Protocol version the runner speaks. */
  protocolVersion: z.number().int().positive(),
  /** The challenge the agent must answer with `proof` in its hello. */
  nonce: LinkNonce,
})

/**
 * runner → agent: second frame on a connection; proves the runner holds the sandbox's link
 * secret. Until it arrives and checks out, the agent answers nothing but this connection's
 * handshake, and never lets the connection displace the runner's current one.
 */
export const HostAuth = z.object({
  t: z.literal('auth'),
  /** HMAC of the agent's challenge (see `linkProof`). */
  proof: LinkProof,
})

/** runner → agent: a request; the agent answers with `result` or `fail` carrying the same id. */
export const HostCall = z.object({
  t: z.literal('call'),
  /** Request id. */
  id: z.number().int().nonnegative(),
  /** Method name (see `AGENT_METHODS`). */
  method: z.string().max(64),
  /** Method parameters, parsed by the agent against the method's schema. */
  params: z.unknown(),
})

/** runner → agent: allows `bytes` more payload on a channel. */
export const HostCredit = z.object({
  t: z.literal('credit'),
  /** Channel. */
  ch: ChannelId,
  /** Additional bytes allowed. */
  bytes: z.number().int().positive(),
})

/** runner → agent: the runner no longer wants a channel (client gone); it detaches, never kills. */
export const HostCloseChannel = z.object({
  t: z.literal('close'),
  /** Channel. */
  ch: ChannelId,
})

/** runner → agent: payload bytes for an upload channel (file writes); the payload follows the header. */
export const HostData = z.object({
  t: z.literal('data'),
  /** Channel. */
  ch: ChannelId,
})

/** runner → agent: end of an upload channel. */
export const HostEnd = z.object({
  t: z.literal('end'),
  /** Channel. */
  ch: ChannelId,
})

/** Heartbeat on the agent link, either direction. */
export const LinkPing = z.object({ t: z.literal('ping'), n: z.number().int() })
/** Heartbeat answer on the agent link, either direction. */
export const LinkPong = z.object({ t: z.literal('pong'), n: z.number().int() })

/** Everything the runner sends to an agent. */
export const HostFrame = z.discriminatedUnion('t', [
  HostHello,
  HostAuth,
  HostCall,
  HostCredit,
  HostCloseChannel,
  HostData,
  HostEnd,
  LinkPing,
  LinkPong,
])
/** A runner → agent frame. */
export type HostFrame = z.infer<typeof HostFrame>

/** agent → runner: answer to `hello`. */
export const AgentHello = z.object({
  t: z.literal('hello'),
  /** Protocol version the agent speaks. */
  protocolVersion: z.number().int().positive(),
  /** Agent package version. */
  agentVersion: z.string(),
  /** Agent process id. */
  pid: z.number().int(),
  /** When the agent started; unchanged across runner reconnects. */
  startedAt: z.number().int(),
  /** The agent's challenge, which the runner answers with `auth`. */
  nonce: LinkNonce,
  /** HMAC of the runner's challenge (see `linkProof`): the agent holds this sandbox's secret. */
  proof: LinkProof,
})

/** agent → runner: successful answer to a call. */
export const AgentResult = z.object({
  t: z.literal('result'),
  /** The call's id. */
  id: z.number().int().nonnegative(),
  /** The method's result, parsed by the runner against the method's schema. */
  result: z.unknown(),
})

/** agent → runner: failed call. */
export const AgentFail = z.object({
  t: z.literal('fail'),
  /** The call's id. */
  id: z.number().int().nonnegative(),
  /** What went wrong. */
  error: WireError,
})

/** agent → runner: output bytes on a channel; the payload follows the header. */
export const AgentData = z.object({
  t: z.literal('data'),
  /** Channel. */
  ch: ChannelId,
  /** Which stream. */
  stream: StreamName,
  /** Run that owns the bytes; null for output between runs and for exec/process channels. */
  run: RunId.nullable(),
  /** Log offset of the first payload byte. */
  offset: Offset,
})

/** agent → runner: a run started in a session attached on this channel. */
export const AgentRunStart = z.object({
  t: z.literal('run_start'),
  /** Channel. */
  ch: ChannelId,
  /** Run id. */
  run: RunId,
  /** Log offset at its start. */
  offset: Offset,
})

/** agent → runner: a run finished. */
export const AgentRunExit = z.object({
  t: z.literal('run_exit'),
  /** Channel. */
  ch: ChannelId,
  /** Run id. */
  run: RunId,
  /** `$?`. */
  code: z.number().int().min(0).max(255),
  /** True when its timeout stopped it. */
  timedOut: z.boolean(),
  /** Wall time. */
  durationMs: z.number().nonnegative(),
  /** Log offset after its last byte. */
  offset: Offset,
  /** True when the sandbox's memory limit killed the command (exit code 137); absent otherwise. */
  oomKilled: z.boolean().optional(),
})

/** agent → runner: replay on a session channel is done; live output follows. */
export const AgentReplayEnd = z.object({
  t: z.literal('replay_end'),
  /** Channel. */
  ch: ChannelId,
  /** Offset where live output continues. */
  offset: Offset,
})

/** agent → runner: the session's bash ended (terminal frame of a session channel). */
export const AgentClosed = z.object({
  t: z.literal('closed'),
  /** Channel. */
  ch: ChannelId,
  /** Session. */
  session: SessionId,
  /** bash's exit status. */
  code: z.number().int().nullable(),
  /** Signal that killed bash. */
  signal: z.string().nullable(),
  /** Why, in words. */
  reason: z.string(),
})

/** agent → runner: an exec, process or file-read channel finished (terminal frame). */
export const AgentEnd = z.object({
  t: z.literal('end'),
  /** Channel. */
  ch: ChannelId,
  /** Exit code of an exec or process; null for file reads. */
  exitCode: z.number().int().nullable(),
  /** True when an exec's timeout stopped it. */
  timedOut: z.boolean(),
  /** Wall time. */
  durationMs: z.number().nonnegative(),
  /** True when the sandbox's memory limit killed an exec (exit code 137); absent otherwise. */
  oomKilled: z.boolean().optional(),
})

/** agent → runner: a channel failed (terminal frame), or, without `ch`, a frame could not be handled. */
export const AgentError = z.object({
  t: z.literal('error'),
  /** Channel, when the error ends one. */
  ch: ChannelId.optional(),
  /** What went wrong. */
  error: WireError,
})

/** agent → runner: a session's bash ended, sent once even when no channel is attached. */
export const AgentSessionClosed = z.object({
  t: z.literal('session_closed'),
  /** Session. */
  session: SessionId,
  /** bash's exit status. */
  code: z.number().int().nullable(),
  /** Signal that killed bash. */
  signal: z.string().nullable(),
  /** Why, in words. */
  reason: z.string(),
})

/**
 * agent → runner: the agent passed `bytes` of a TCP channel's upload on to its socket; the
 * runner may send that many more. Upload flow control: a server that never reads stops the
 * runner after one window, and the runner stops reading its client.
 */
export const AgentCredit = z.object({
  t: z.literal('credit'),
  /** Channel. */
  ch: ChannelId,
  /** Additional bytes allowed. */
  bytes: z.number().int().positive(),
})

/** Everything an agent sends to the runner. */
export const AgentFrame = z.discriminatedUnion('t', [
  AgentHello,
  AgentResult,
  AgentFail,
  AgentData,
  AgentRunStart,
  AgentRunExit,
  AgentReplayEnd,
  AgentClosed,
  AgentEnd,
  AgentError,
  AgentSessionClosed,
  AgentCredit,
  LinkPing,
  LinkPong,
])
/** An agent → runner frame. */
export type AgentFrame = z.infer<typeof AgentFrame>

/** The `t` values a runner may send. */
export const HOST_FRAME_TYPES: readonly string[] = HostFrame.options.map((o) => o.shape.t.value)
/** The `t` values an agent may send. */
export const AGENT_FRAME_TYPES: readonly string[] = AgentFrame.options.map((o) => o.shape.t.value)
