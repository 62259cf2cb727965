import { z } from 'zod'
import { Env, Offset, Timestamp } from './primitives.ts'

// Terminals: a program (bash by default) on a pseudo-terminal inside the sandbox. Output is one
// byte stream kept in a bounded scrollback with byte offsets, like a shell's output log, so a
// client reattaches from the offset it has seen and gets OUTPUT_LOST when that was evicted.
// Input is raw bytes. Several clients may attach to one terminal at once and all see the same
// screen; the terminal lives until its program exits or it is closed, not with its clients.
//
// The terminal socket (`/v1/sandboxes/:id/terminals/:terminalId/socket?offset=n`, subprotocol
// `TERMINAL_SUBPROTOCOL` beside `bearer.<secret>`): binary messages from the client are input
// bytes; binary messages from the runner are `u32 offsetHigh · u32 offsetLow · output bytes`
// (big-endian), the log offset of the first byte, then the bytes. Text messages carry the JSON
// control frames below.

/** The WebSocket subprotocol of a terminal socket. */
export const TERMINAL_SUBPROTOCOL = 'conch.terminal.v1'

/** A terminal id the agent mints: `t_` and 16 of [a-z0-9]. */
export const TerminalId = z.string().regex(/^t_[a-z0-9]{16}$/, 'terminal ids look like t_xxxxxxxxxxxxxxxx')
/** A terminal id. */
export type TerminalId = z.infer<typeof TerminalId>

/** Smallest and largest terminal sizes accepted, in character cells. */
export const TERMINAL_SIZE_LIMITS = { minCols: 2, maxCols: 1000, minRows: 1, maxRows: 500 } as const

/** A column count within `TERMINAL_SIZE_LIMITS`. */
export const TerminalCols = z
  .number()
  .int('cols must be a whole number')
  .min(TERMINAL_SIZE_LIMITS.minCols)
  .max(TERMINAL_SIZE_LIMITS.maxCols)
/** A row count within `TERMINAL_SIZE_LIMITS`. */
export const TerminalRows = z
  .number()
  .int('rows must be a whole number')
  .min(TERMINAL_SIZE_LIMITS.minRows)
  .max(TERMINAL_SIZE_LIMITS.maxRows)

/** Signals a client may send to a terminal's program. */
export const TerminalSignal = z.enum([
  'SIGINT',
  'SIGTERM',
  'SIGKILL',
  'SIGHUP',
  'SIGQUIT',
  'SIGTSTP',
  'SIGCONT',
])
/** A terminal signal. */
export type TerminalSignal = z.infer<typeof TerminalSignal>

/** What a new terminal runs and how big it is. */
export const TerminalOptions = z.object({
  /** Columns (default 80). */
  cols: TerminalCols.optional(),
  /** Rows (default 24). */
  rows: TerminalRows.optional(),
  /** Variables added to the sandbox's base environment (TERM defaults to xterm-256color). */
  env: Env.optional(),
  /** Working directory: `/workspace/...`, relative to the workspace, or absolute. */
  cwd: z.string().min(1).max(4096).optional(),
  /** Program and arguments to run instead of an interactive bash. */
  command: z.array(z.string().min(1).max(4096)).min(1).max(256).optional(),
})
/** Terminal options. */
export type TerminalOptions = z.infer<typeof TerminalOptions>

/** A terminal's state. */
export const TerminalInfo = z.object({
  /** Terminal id. */
  id: TerminalId,
  /** The program and its arguments. */
  command: z.array(z.string()),
  /** Current columns. */
  cols: z.number().int(),
  /** Current rows. */
  rows: z.number().int(),
  /** Process id of the program inside the sandbox. */
  pid: z.number().int(),
  /** When it started. */
  createdAt: Timestamp,
  /** Offset after the last output byte. */
  endOffset: Offset,
  /** Smallest offset the scrollback can still replay from. */
  startOffset: Offset,
  /** Exit code once the program ended (128+n for signal n), else null. */
  exitCode: z.number().int().nullable(),
  /** The signal that ended the program, else null. */
  signal: z.string().nullable(),
})
/** Terminal info. */
export type TerminalInfo = z.infer<typeof TerminalInfo>

/**
 * Link only: what `terminal.attach` answers, the terminal and, from agents that acknowledge
 * input, `inputWindow`: the bytes of input the runner may send on the channel before the agent
 * returns credit (it does as the pty takes them). Agents without it take input without credit.
 */
export const TerminalAttachment = TerminalInfo.extend({
  /** Input bytes the runner may have unacknowledged on the channel. */
  inputWindow: z.number().int().positive().optional(),
})
/** What `terminal.attach` answers. */
export type TerminalAttachment = z.infer<typeof TerminalAttachment>

/** A new size. */
export const TerminalSize = z.object({
  /** Columns. */
  cols: TerminalCols,
  /** Rows. */
  rows: TerminalRows,
})
/** A terminal size. */
export type TerminalSize = z.infer<typeof TerminalSize>

/** `GET .../terminals` answer. */
export const TerminalList = z.object({ terminals: z.array(TerminalInfo) })

/** Path parameters of terminal routes. */
export const TerminalParams = z.object({ id: z.string(), terminalId: TerminalId })

/** `POST .../terminals/:terminalId/signal` body. */
export const TerminalSignalRequest = z.object({ signal: TerminalSignal })

/** The terminal socket's query string. */
export const TerminalQuery = z.object({
  /** Replay output from this offset (default: the scrollback's start). */
  offset: z.coerce.number().int().nonnegative().optional(),
})

/** client → runner: resize the terminal. */
export const TerminalResizeFrame = z.object({ type: z.literal('resize'), ...TerminalSize.shape })
/** client → runner: signal the terminal's program. */
export const TerminalSignalFrame = z.object({ type: z.literal('signal'), signal: TerminalSignal })
/** client → runner: heartbeat. */
export const TerminalPingFrame = z.object({ type: z.literal('ping') })

/** Control frames a terminal client sends as text; input travels as binary messages. */
export const TerminalClientFrame = z.discriminatedUnion('type', [
  TerminalResizeFrame,
  TerminalSignalFrame,
  TerminalPingFrame,
])
/** A terminal client control frame. */
export type TerminalClientFrame = z.infer<typeof TerminalClientFrame>

/** runner → client: attached; replay from `offset` follows as binary messages. */
export const TerminalReadyFrame = z.object({
  type: z.literal('terminal_ready'),
  /** The terminal. */
  terminal: TerminalInfo,
  /** Where the replay starts. */
  offset: Offset,
})
/** runner → client: the replay is done; live output follows. */
export const TerminalReplayEndFrame = z.object({ type: z.literal('replay_end'), offset: Offset })
/** runner → client: the program ended (last frame). */
export const TerminalExitFrame = z.object({
  type: z.literal('terminal_exit'),
  /** Exit code, 128+n for signal n. */
  code: z.number().int().nullable(),
  /** Signal name, when a signal ended it. */
  signal: z.string().nullable(),
  /** Offset after the last byte, when the runner could read it. */
  offset: Offset.optional(),
})
/** runner → client: answer to `ping`. */
export const TerminalPongFrame = z.object({ type: z.literal('pong') })

/** The binary output header's size: two big-endian u32 halves of the offset. */
export const TERMINAL_OUTPUT_HEADER_BYTES = 8

/** The header of a binary output message alone, for a sender that sends the bytes after it. */
export function encodeTerminalOutputHeader(offset: number): Uint8Array {
  const out = new Uint8Array(TERMINAL_OUTPUT_HEADER_BYTES)
  const view = new DataView(out.buffer)
  view.setUint32(0, Math.floor(offset / 2 ** 32))
  view.setUint32(4, offset >>> 0)
  return out
}

/** Prefixes output bytes with their offset, as the terminal socket sends them. */
export function encodeTerminalOutput(offset: number, bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(TERMINAL_OUTPUT_HEADER_BYTES + bytes.byteLength)
  out.set(encodeTerminalOutputHeader(offset))
  out.set(bytes, TERMINAL_OUTPUT_HEADER_BYTES)
  return out
}

/** Reads a binary output message; null when it is shorter than its header. */
export function decodeTerminalOutput(message: Uint8Array): { offset: number; bytes: Uint8Array } | null {
  if (message.byteLength < TERMINAL_OUTPUT_HEADER_BYTES) return null
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength)
  const offset = view.getUint32(0) * 2 ** 32 + view.getUint32(4)
  return { offset, bytes: message.subarray(TERMINAL_OUTPUT_HEADER_BYTES) }
}

// The types the schemas above parse to, one per schema.
/** A terminal width in columns. */
export type TerminalCols = z.infer<typeof TerminalCols>
/** A terminal height in rows. */
export type TerminalRows = z.infer<typeof TerminalRows>
/** `GET .../terminals` answer. */
export type TerminalList = z.infer<typeof TerminalList>
/** Path parameters of a terminal route. */
export type TerminalParams = z.infer<typeof TerminalParams>
/** Body of a terminal signal request. */
export type TerminalSignalRequest = z.infer<typeof TerminalSignalRequest>
/** Query of the terminal socket. */
export type TerminalQuery = z.infer<typeof TerminalQuery>
/** The first frame on a terminal socket. */
export type TerminalReadyFrame = z.infer<typeof TerminalReadyFrame>
/** The end of a terminal replay. */
export type TerminalReplayEndFrame = z.infer<typeof TerminalReplayEndFrame>
/** A terminal program ended. */
export type TerminalExitFrame = z.infer<typeof TerminalExitFrame>
/** An answer to a terminal ping. */
export type TerminalPongFrame = z.infer<typeof TerminalPongFrame>
