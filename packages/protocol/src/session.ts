import { z } from 'zod'
import { Env, Offset, RunId, SessionId, TimeoutMs, Timestamp } from './primitives.ts'

/** Options for a new session (a new long-lived bash). */
export const SessionOptions = z.object({
  /** Session id; generated when absent. */
  id: SessionId.optional(),
  /** Variables added to the session's starting environment. */
  env: Env.optional(),
  /** Starting directory; relative paths are resolved against the sandbox workspace. */
  cwd: z.string().min(1).max(4096).optional(),
  /** Default timeout of this session's runs. */
  commandTimeoutMs: TimeoutMs.optional(),
  /** Start from an empty environment instead of the sandbox's base environment. */
  cleanEnv: z.boolean().optional(),
})
/** New-session options. */
export type SessionOptions = z.infer<typeof SessionOptions>

/** Why and how a shell closed. */
export const ShellClosedInfo = z.object({
  /** bash's exit status, when it exited. */
  code: z.number().int().nullable(),
  /** The signal that killed bash, when one did (`SIGKILL`). */
  signal: z.string().nullable(),
  /** A sentence for humans: `exit 7`, `killed by SIGKILL`, `did not recover after a timeout`. */
  reason: z.string(),
})
/** How a shell closed. */
export type ShellClosedInfo = z.infer<typeof ShellClosedInfo>

/** A session as the agent and the runner report it. */
export const SessionInfo = z.object({
  /** Session id. */
  id: SessionId,
  /** `open` while bash runs; `closed` after it ended. */
  status: z.enum(['open', 'closed']),
  /** The directory the session started in. */
  cwd: z.string(),
  /** Default timeout of this session's runs. */
  commandTimeoutMs: z.number().int(),
  /** Whether it started from an empty environment. */
  cleanEnv: z.boolean(),
  /** bash's process id inside the sandbox, while open. */
  pid: z.number().int().nullable(),
  /** When the session was created. */
  createdAt: Timestamp,
  /** End of the session's output log: the offset the next output byte gets. */
  offset: Offset,
  /** The run in progress, if any. */
  running: RunId.nullable(),
  /** Runs waiting behind it. */
  queued: z.number().int().nonnegative(),
  /** How the shell closed, once it has. */
  closed: ShellClosedInfo.nullable(),
})
/** A session. */
export type SessionInfo = z.infer<typeof SessionInfo>

/** One command in a session's history. */
export const HistoryEntry = z.object({
  /** Position in the history, from 0; stable for the session's life. */
  index: z.number().int().nonnegative(),
  /** The command text as submitted. */
  command: z.string(),
  /** When it started. */
  startedAt: Timestamp,
  /** Its exit code, or null while it runs or when the shell closed under it. */
  exitCode: z.number().int().nullable(),
  /** Its duration, or null while it runs. */
  durationMs: z.number().nullable(),
})
/** A history entry. */
export type HistoryEntry = z.infer<typeof HistoryEntry>

/** A query over a session's history. */
export const HistoryQuery = z.object({
  /** Keep commands that start with this text. */
  prefix: z.string().optional(),
  /** Keep commands that contain this text. */
  contains: z.string().optional(),
  /** At most this many entries, newest last. */
  limit: z.coerce.number().int().positive().max(10_000).optional(),
})
/** A history query. */
export type HistoryQuery = z.infer<typeof HistoryQuery>
