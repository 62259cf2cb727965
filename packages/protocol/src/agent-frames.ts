import { z } from 'zod'
import { WireError } from './error-codes.ts'
import { Offset, RunId, SessionId } from './primitives.ts'

// Frames on the runner↔agent link: one byte stream (Unix socket or vsock), framed by
// `@conch/link` as a JSON header plus an optional raw payload. Every header is discriminated on
// `type`, as on the WebSocket, and a shell's events carry the WebSocket's names and fields
// (`shell_start`, `shell_out`, `shell_err`, `shell_exit`, `scrollback_end`, `shell_closed`;
// run id `id`, session `sessionId`). The link is multiplexed: requests carry a numeric `id`
// and get exactly one `result` or `fail`; streams flow on numbered channels (`ch`) that the
// runner opens, and each channel ends with exactly one terminal frame (`end`, `shell_closed`
// or `error`). Flow control is per channel: the agent sends at most
// `LIMITS.channelWindowBytes` of payload beyond the credit the runner has granted.

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
  type: z.literal('hello'),
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
  type: z.literal('auth'),
  /** HMAC of the agent's challenge (see `linkProof`). */
  proof: LinkProof,
})

/** runner → agent: a request; the agent answers with `result` or `fail` carrying the same id. */
export const HostCall = z.object({
  type: z.literal('call'),
  /** Request id. */
  id: z.number().int().nonnegative(),
  /** Method name (see `AGENT_METHODS`). */
  method: z.string().max(64),
  /** Method parameters, parsed by the agent against the method's schema. */
  params: z.unknown(),
})

/** runner → agent: allows `bytes` more payload on a channel. */
export const HostCredit = z.object({
  type: z.literal('credit'),
  /** Channel. */
  ch: ChannelId,
  /** Additional bytes allowed. */
  bytes: z.number().int().positive(),
})

/** runner → agent: the runner no longer wants a channel (client gone); it detaches, never kills. */
export const HostCloseChannel = z.object({
  type: z.literal('close'),
  /** Channel. */
  ch: ChannelId,
})

/** runner → agent: payload bytes for an upload channel (file writes); the payload follows the header. */
export const HostData = z.object({
  type: z.literal('data'),
  /** Channel. */
  ch: ChannelId,
})

/** runner → agent: end of an upload channel. */
export const HostEnd = z.object({
  type: z.literal('end'),
  /** Channel. */
  ch: ChannelId,
})

/** Heartbeat on the agent link, either direction. */
export const LinkPing = z.object({ type: z.literal('ping'), n: z.number().int() })
/** Heartbeat answer on the agent link, either direction. */
export const LinkPong = z.object({ type: z.literal('pong'), n: z.number().int() })

/** Everything the runner sends to an agent. */
export const HostFrame = z.discriminatedUnion('type', [
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
  type: z.literal('hello'),
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
  type: z.literal('result'),
  /** The call's id. */
  id: z.number().int().nonnegative(),
  /** The method's result, parsed by the runner against the method's schema. */
  result: z.unknown(),
})

/** agent → runner: failed call. */
export const AgentFail = z.object({
  type: z.literal('fail'),
  /** The call's id. */
  id: z.number().int().nonnegative(),
  /** What went wrong. */
  error: WireError,
})

/** agent → runner: stdout bytes of a session, exec or process channel; the payload follows the header. */
export const AgentShellOut = z.object({
  type: z.literal('shell_out'),
  /** Channel. */
  ch: ChannelId,
  /** Run that owns the bytes; null for output between runs and for exec/process channels. */
  id: RunId.nullable(),
  /** Log offset of the first payload byte. */
  offset: Offset,
})

/** agent → runner: stderr bytes, as `shell_out`. */
export const AgentShellErr = AgentShellOut.extend({ type: z.literal('shell_err') })

/** agent → runner: bytes of a channel that carries no command output (file reads); the payload follows the header. */
export const AgentData = z.object({
  type: z.literal('data'),
  /** Channel. */
  ch: ChannelId,
  /** Offset of the first payload byte in the channel's stream. */
  offset: Offset,
})

/** agent → runner: a run started in a session attached on this channel. */
export const AgentShellStart = z.object({
  type: z.literal('shell_start'),
  /** Channel. */
  ch: ChannelId,
  /** Run id. */
  id: RunId,
  /** Log offset at its start. */
  offset: Offset,
})

/** agent → runner: a run finished. */
export const AgentShellExit = z.object({
  type: z.literal('shell_exit'),
  /** Channel. */
  ch: ChannelId,
  /** Run id. */
  id: RunId,
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
export const AgentScrollbackEnd = z.object({
  type: z.literal('scrollback_end'),
  /** Channel. */
  ch: ChannelId,
  /** Offset where live output continues. */
  offset: Offset,
})

/** agent → runner: the session's bash ended (terminal frame of a session channel). */
export const AgentShellClosed = z.object({
  type: z.literal('shell_closed'),
  /** Channel. */
  ch: ChannelId,
  /** Session. */
  sessionId: SessionId,
  /** bash's exit status. */
  code: z.number().int().nullable(),
  /** Signal that killed bash. */
  signal: z.string().nullable(),
  /** Why, in words. */
  reason: z.string(),
})

/**
 * agent → runner: an exec, process or file-read channel finished (terminal frame). Not
 * `shell_exit`: it ends a channel that has no run id, and its code is null for file reads.
 */
export const AgentEnd = z.object({
  type: z.literal('end'),
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
  type: z.literal('error'),
  /** Channel, when the error ends one. */
  ch: ChannelId.optional(),
  /** What went wrong. */
  error: WireError,
})

/** agent → runner: a session's bash ended, sent once even when no channel is attached. */
export const AgentSessionClosed = z.object({
  type: z.literal('session_closed'),
  /** Session. */
  sessionId: SessionId,
  /** bash's exit status. */
  code: z.number().int().nullable(),
  /** Signal that killed bash. */
  signal: z.string().nullable(),
  /** Why, in words. */
  reason: z.string(),
})

/** Everything an agent sends to the runner. */
export const AgentFrame = z.discriminatedUnion('type', [
  AgentHello,
  AgentResult,
  AgentFail,
  AgentShellOut,
  AgentShellErr,
  AgentData,
  AgentShellStart,
  AgentShellExit,
  AgentScrollbackEnd,
  AgentShellClosed,
  AgentEnd,
  AgentError,
  AgentSessionClosed,
  LinkPing,
  LinkPong,
])
/** An agent → runner frame. */
export type AgentFrame = z.infer<typeof AgentFrame>

/** The `type` values a runner may send. */
export const HOST_FRAME_TYPES: readonly string[] = HostFrame.options.map((o) => o.shape.type.value)
/** The `type` values an agent may send. */
export const AGENT_FRAME_TYPES: readonly string[] = AgentFrame.options.map((o) => o.shape.type.value)

/** A `HostHello` frame. */
export type HostHello = z.infer<typeof HostHello>
/** A `HostAuth` frame. */
export type HostAuth = z.infer<typeof HostAuth>
/** A `HostCall` frame. */
export type HostCall = z.infer<typeof HostCall>
/** A `HostCredit` frame. */
export type HostCredit = z.infer<typeof HostCredit>
/** A `HostCloseChannel` frame. */
export type HostCloseChannel = z.infer<typeof HostCloseChannel>
/** A `HostData` frame. */
export type HostData = z.infer<typeof HostData>
/** A `HostEnd` frame. */
export type HostEnd = z.infer<typeof HostEnd>
/** A `LinkPing` frame. */
export type LinkPing = z.infer<typeof LinkPing>
/** A `LinkPong` frame. */
export type LinkPong = z.infer<typeof LinkPong>
/** A `AgentHello` frame. */
export type AgentHello = z.infer<typeof AgentHello>
/** A `AgentResult` frame. */
export type AgentResult = z.infer<typeof AgentResult>
/** A `AgentFail` frame. */
export type AgentFail = z.infer<typeof AgentFail>
/** A `AgentShellOut` frame. */
export type AgentShellOut = z.infer<typeof AgentShellOut>
/** A `AgentShellErr` frame. */
export type AgentShellErr = z.infer<typeof AgentShellErr>
/** A `AgentData` frame. */
export type AgentData = z.infer<typeof AgentData>
/** A `AgentShellStart` frame. */
export type AgentShellStart = z.infer<typeof AgentShellStart>
/** A `AgentShellExit` frame. */
export type AgentShellExit = z.infer<typeof AgentShellExit>
/** A `AgentScrollbackEnd` frame. */
export type AgentScrollbackEnd = z.infer<typeof AgentScrollbackEnd>
/** A `AgentShellClosed` frame. */
export type AgentShellClosed = z.infer<typeof AgentShellClosed>
/** A `AgentEnd` frame. */
export type AgentEnd = z.infer<typeof AgentEnd>
/** A `AgentError` frame. */
export type AgentError = z.infer<typeof AgentError>
/** A `AgentSessionClosed` frame. */
export type AgentSessionClosed = z.infer<typeof AgentSessionClosed>
