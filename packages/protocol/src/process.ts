import { z } from 'zod'
import { Encoding, Env, Offset, SessionId, Timestamp } from './primitives.ts'

/** Options for a background process. */
export const ProcessOptions = z.object({
  /** The command line, run by `bash -c`. */
  command: z.string().min(1),
  /** Working directory; defaults to the session's cwd when `sessionId` is given, else the workspace. */
  cwd: z.string().min(1).max(4096).optional(),
  /** Variables added to its environment. */
  env: Env.optional(),
  /** Take the starting cwd and exported environment from this session's shell. */
  sessionId: SessionId.optional(),
})
/** Background-process options. */
export type ProcessOptions = z.infer<typeof ProcessOptions>

/** A background process id, as the agent issues it. */
export const ProcessId = z.string().regex(/^proc_[A-Za-z0-9]{4,40}$/)
/** The type `ProcessId` parses to. */
export type ProcessId = z.infer<typeof ProcessId>

/** A background process. */
export const ProcessInfo = z.object({
  /** Process id within the sandbox's agent (not the OS pid). */
  id: ProcessId,
  /** OS process id inside the sandbox. */
  pid: z.number().int(),
  /** The command line. */
  command: z.string(),
  /** `running`, `exited` on its own, or `killed` by a kill call. */
  status: z.enum(['running', 'exited', 'killed']),
  /** Exit code once it exited; 128+n when a signal ended it. */
  exitCode: z.number().int().nullable(),
  /** The ending signal's name, when a signal ended it. */
  signal: z.string().nullable(),
  /** When it started. */
  startedAt: Timestamp,
  /** When it ended. */
  endedAt: Timestamp.nullable(),
  /** End of its output log. */
  offset: Offset,
})
/** A background process. */
export type ProcessInfo = z.infer<typeof ProcessInfo>

/** Output of a background process since an offset. */
export const ProcessOutput = z.object({
  /** stdout bytes since the offset. */
  stdout: z.string(),
  /** stderr bytes since the offset. */
  stderr: z.string(),
  /** How `stdout` and `stderr` are encoded. */
  encoding: Encoding,
  /** Pass this as `since` on the next poll to get only newer output. */
  nextOffset: Offset,
  /** The process status at the time of the answer. */
  status: z.enum(['running', 'exited', 'killed']),
})
/** Process output. */
export type ProcessOutput = z.infer<typeof ProcessOutput>
