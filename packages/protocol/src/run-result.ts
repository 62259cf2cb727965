import { z } from 'zod'
import { Encoding } from './primitives.ts'

/** The buffered result of one command: a shell run, a session run over REST, or an exec. */
export const RunResult = z.object({
  /** Everything the command wrote to stdout, up to the output cap. */
  stdout: z.string(),
  /** Everything the command wrote to stderr, up to the output cap. */
  stderr: z.string(),
  /** How `stdout` and `stderr` are encoded. */
  encoding: Encoding,
  /** `$?` of the command: 0-255, 128+n for signal n. */
  exitCode: z.number().int().min(0).max(255),
  /** True when the timeout stopped the command; the output is what it wrote until then. */
  timedOut: z.boolean(),
  /** True when either stream exceeded the output cap and was cut on a character boundary. */
  truncated: z.boolean(),
  /** Total bytes the command wrote to stdout, including any cut part. */
  stdoutBytes: z.number().int().nonnegative(),
  /** Total bytes the command wrote to stderr, including any cut part. */
  stderrBytes: z.number().int().nonnegative(),
  /** Wall time from the start of the command to its exit. */
  durationMs: z.number().nonnegative(),
  /** True when the sandbox's memory limit killed the command (exit code 137); absent otherwise. */
  oomKilled: z.boolean().optional(),
})
/** A buffered command result. */
export type RunResult = z.infer<typeof RunResult>
