import { z } from 'zod'
import { ErrorCode } from './error-codes.ts'
import { LIMITS } from './limits.ts'
import { Encoding, Offset, RunId, SessionId, TimeoutMs } from './primitives.ts'
import { SnapshotId } from './snapshot.ts'
import { Capability } from './version.ts'

// Frames on the WebSocket `/v1/sandboxes/:id/shell[?sessionId=&offset=&encoding=]`.
// Every frame is one JSON text message, discriminated on `type`.
//
// Connect:   runner → hello, shell_ready, [replayed frames], scrollback_end, then live frames.
// Each run:  client → shell_run{id}; runner → shell_start{id}, shell_out/shell_err{id}*, shell_exit{id}.
// Output that no run owns (background jobs between runs) has `id: null`.

/** client → runner: announces the client's protocol version and capabilities (optional). */
export const ClientHello = z.object({
  type: z.literal('hello'),
  /** The protocol version the client speaks. */
  protocolVersion: z.number().int().positive(),
  /** Capabilities the client uses. */
  capabilities: z.array(z.string()).max(64).optional(),
  /**
   * With `output_ack`: output bytes the runner may send beyond the client's last `ack`
   * (default `LIMITS.clientWindowBytes`).
   */
  windowBytes: z.number().int().min(LIMITS.minClientWindowBytes).max(LIMITS.maxClientWindowBytes).optional(),
})
/** A client's hello. */
export type ClientHello = z.infer<typeof ClientHello>

/** client → runner: runs a command in the shell; runs queue in arrival order. */
export const ShellRun = z.object({
  type: z.literal('shell_run'),
  /** Client-chosen id echoed on every frame of this run. */
  id: RunId,
  /** The command text; any bash, multi-line included. */
  command: z.string(),
  /** Per-run timeout, clamped between 1 s and the runner's maximum. */
  timeoutMs: TimeoutMs.optional(),
  /** Data for the command's stdin; without it stdin is /dev/null. */
  stdin: z.string().optional(),
  /** How `stdin` is encoded; default `utf8`. */
  stdinEncoding: Encoding.optional(),
  /** stdin is a pipe the client feeds with `shell_stdin` while the run is in flight (capability `stdin_pipe`). */
  stdinPipe: z.boolean().optional(),
})
/** A run request. */
export type ShellRun = z.infer<typeof ShellRun>

/**
 * client → runner (capability `stdin_pipe`): input for a run started with `stdinPipe`, once it
 * has started (`shell_start`); `end` closes the pipe after `data`, and the command reads EOF.
 */
export const ShellStdin = z.object({
  type: z.literal('shell_stdin'),
  /** The run. */
  id: RunId,
  /** Input bytes in `encoding`. */
  data: z.string().optional(),
  /** How `data` is encoded; default `utf8`. */
  encoding: Encoding.optional(),
  /** Close the pipe after `data`. */
  end: z.boolean().optional(),
})
/** Run input. */
export type ShellStdin = z.infer<typeof ShellStdin>

/** client → runner: Ctrl-C for the running command (SIGINT to it and to a builtin loop in bash). */
export const ShellInterrupt = z.object({
  type: z.literal('shell_interrupt'),
  /** Interrupt only if this run is the one running. */
  id: RunId.optional(),
})
/** The type `ShellInterrupt` parses to. */
export type ShellInterrupt = z.infer<typeof ShellInterrupt>

/**
 * client → runner (capability `output_ack`): the client has consumed the session's output up to
 * log offset `offset`. The runner keeps at most the window of output past the latest ack in
 * flight, and stops reading from the shell while it is used up, so a slow consumer slows the
 * command. The latest ack counts, so a reconnecting client can state what it still holds.
 */
export const ShellAck = z.object({
  type: z.literal('ack'),
  /** Log offset up to which output has been consumed. */
  offset: Offset,
})
/** An output acknowledgement. */
export type ShellAck = z.infer<typeof ShellAck>

/** Either side: heartbeat request. */
export const Ping = z.object({
  type: z.literal('ping'),
  /** Opaque value echoed in the pong. */
  t: z.number().optional(),
})
/** The type `Ping` parses to. */
export type Ping = z.infer<typeof Ping>

/** Either side: heartbeat answer. */
export const Pong = z.object({
  type: z.literal('pong'),
  /** The ping's value. */
  t: z.number().optional(),
})
/** The type `Pong` parses to. */
export type Pong = z.infer<typeof Pong>

/** Everything a client may send. */
export const ClientFrame = z.discriminatedUnion('type', [
  ClientHello,
  ShellRun,
  ShellStdin,
  ShellInterrupt,
  ShellAck,
  Ping,
  Pong,
])
/** A client frame. */
export type ClientFrame = z.infer<typeof ClientFrame>
/** The `type` values a client may send. */
export const CLIENT_FRAME_TYPES = [
  'hello',
  'shell_run',
  'shell_stdin',
  'shell_interrupt',
  'ack',
  'ping',
  'pong',
] as const

/** runner → client: first frame on every connection. */
export const ServerHello = z.object({
  type: z.literal('hello'),
  /** The runner's protocol version. */
  protocolVersion: z.number().int().positive(),
  /** What the runner supports. */
  capabilities: z.array(Capability),
})
/** The type `ServerHello` parses to. */
export type ServerHello = z.infer<typeof ServerHello>

/** runner → client: the shell is attached; replay (if any) follows, then `scrollback_end`. */
export const ShellReady = z.object({
  type: z.literal('shell_ready'),
  /** Id to reattach with. */
  sessionId: SessionId,
  /** Offset the replay starts from (the end of the log for a new attachment). */
  offset: Offset,
  /** Encoding of `data` on this connection. */
  encoding: Encoding,
  /** The run in progress when the client attached. */
  running: RunId.nullable(),
  /**
   * Present when the session was restored from a snapshot (a fork): its shell state came back,
   * but its processes were restarted, not continued.
   */
  resumed: z
    .object({
      /** The snapshot the session came from. */
      snapshotId: SnapshotId,
      /** Background processes started again with the sandbox (0 when none were). */
      processesRestarted: z.number().int().nonnegative(),
    })
    .optional(),
})
/** The type `ShellReady` parses to. */
export type ShellReady = z.infer<typeof ShellReady>

/** runner → client: a run left the queue and started. */
export const ShellStart = z.object({
  type: z.literal('shell_start'),
  /** Run id. */
  id: RunId,
  /** Log offset at the start of the run. */
  offset: Offset,
})
/** The type `ShellStart` parses to. */
export type ShellStart = z.infer<typeof ShellStart>

/** runner → client: bytes written to stdout. */
export const ShellOut = z.object({
  type: z.literal('shell_out'),
  /** The run they belong to; null for output between runs. */
  id: RunId.nullable(),
  /** The bytes, encoded per the connection's encoding. */
  data: z.string(),
  /** Log offset of the first byte; the next frame's offset is this plus the byte length. */
  offset: Offset,
})
/** The type `ShellOut` parses to. */
export type ShellOut = z.infer<typeof ShellOut>

/** runner → client: bytes written to stderr. */
export const ShellErr = ShellOut.extend({ type: z.literal('shell_err') })
/** The type `ShellErr` parses to. */
export type ShellErr = z.infer<typeof ShellErr>

/** runner → client: a run finished; the shell stays open. */
export const ShellExit = z.object({
  type: z.literal('shell_exit'),
  /** Run id. */
  id: RunId,
  /** `$?` of the command. */
  code: z.number().int().min(0).max(255),
  /** True when the timeout stopped it. */
  timedOut: z.boolean(),
  /** Wall time of the run. */
  durationMs: z.number().nonnegative(),
  /** Log offset after the run's last byte. */
  offset: Offset,
  /** True when the sandbox's memory limit killed the command (exit code 137); absent otherwise. */
  oomKilled: z.boolean().optional(),
  /**
   * Log offset at the start of the run, when this frame also stands for the run's `shell_start`
   * (capability `start_in_exit`: the runner had both to send at once); absent otherwise.
   */
  startOffset: Offset.optional(),
})
/** The type `ShellExit` parses to. */
export type ShellExit = z.infer<typeof ShellExit>

/** runner → client: bash ended; every pending and later run fails. */
export const ShellClosed = z.object({
  type: z.literal('shell_closed'),
  /** bash's exit status. */
  code: z.number().int().nullable(),
  /** Signal that killed bash. */
  signal: z.string().nullable(),
  /** Why, in words. */
  reason: z.string(),
})
/** The type `ShellClosed` parses to. */
export type ShellClosed = z.infer<typeof ShellClosed>

/** runner → client: replay of missed output is complete; live output follows. */
export const ScrollbackEnd = z.object({
  type: z.literal('scrollback_end'),
  /** Offset where live output continues. */
  offset: Offset,
})
/** The type `ScrollbackEnd` parses to. */
export type ScrollbackEnd = z.infer<typeof ScrollbackEnd>

/** runner → client: a request failed; `id` names the run when there is one. */
export const ErrorFrame = z.object({
  type: z.literal('error'),
  /** The run or request this is about. */
  id: z.string().nullable(),
  /** Error code. */
  code: ErrorCode,
  /** What happened and what to do. */
  message: z.string(),
  /** Extra facts (`earliestOffset` for OUTPUT_LOST). */
  details: z.record(z.string(), z.unknown()).optional(),
})
/** An error frame. */
export type ErrorFrame = z.infer<typeof ErrorFrame>

/** Everything the runner may send. */
export const ServerFrame = z.discriminatedUnion('type', [
  ServerHello,
  ShellReady,
  ShellStart,
  ShellOut,
  ShellErr,
  ShellExit,
  ShellClosed,
  ScrollbackEnd,
  ErrorFrame,
  Ping,
  Pong,
])
/** A server frame. */
export type ServerFrame = z.infer<typeof ServerFrame>

/** Query parameters of the shell WebSocket. */
export const ShellQuery = z.object({
  /** Reattach to this session (or open it under this id). */
  sessionId: SessionId.optional(),
  /** Replay output from this log offset; default: only new output. */
  offset: z.coerce.number().int().nonnegative().optional(),
  /** Encoding of output `data`; default `utf8`. */
  encoding: Encoding.optional(),
})
/** Shell WebSocket query. */
export type ShellQuery = z.infer<typeof ShellQuery>

/** The `type` values the runner may send. */
export const SERVER_FRAME_TYPES: readonly string[] = ServerFrame.options.map((o) => o.shape.type.value)
