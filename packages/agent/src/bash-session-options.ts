// How a session's shell is built: the options of BashSession and their defaults.
import type { ShellClosedInfo } from '@conch/protocol'
import { LIMITS } from '@conch/protocol/zod-free'
import type { Clock } from './clock.ts'
import type { Logger } from './logger.ts'
import type { OomCheck } from './oom-check.ts'
import type { ProcessTable } from './process-tree.ts'
import type { ScrollbackBudget } from './scrollback-budget.ts'
import type { Spawn } from './spawner.ts'

/** How a session is built. */
export interface BashSessionOptions {
  /** Session id, used in errors and logs. */
  id: string
  /** The complete starting environment of bash. */
  env: Record<string, string>
  /** The starting directory. */
  cwd: string
  /** Default timeout of runs that do not set one, in ms. */
  commandTimeoutMs: number
  /** Whether the environment started empty (reported back only). */
  cleanEnv?: boolean
  /** Process creation. */
  spawn: Spawn
  /** Time. */
  clock: Clock
  /** Logging. */
  logger: Logger
  /** /proc access for finding a run's processes. */
  processTable: ProcessTable
  /** Directory under which the session's private temp directory is made. */
  tempRoot: string
  /**
   * The sandbox user's gid when bash runs as another user than the agent: the temp directory
   * and its files stay the agent's (so sandbox code cannot rewrite a command) and become
   * readable by this group, so bash can source them.
   */
  sandboxGid?: number
  /** Time between SIGINT, SIGTERM and SIGKILL when a timeout stops a run. */
  killGraceMs?: number
  /** Output kept for reattach, in bytes. */
  scrollbackBytes?: number
  /** The agent-wide bound on all scrollback together, shared with other logs. */
  scrollbackBudget?: ScrollbackBudget
  /** Default cap per stream of a buffered result. */
  outputCapBytes?: number
  /** Largest command text, in UTF-8 bytes. */
  maxCommandBytes?: number
  /** The bash binary. */
  bashPath?: string
  /** Tells whether a run's exit code was the sandbox's memory limit; never, when absent. */
  oomCheck?: OomCheck
}

/** The options with every default filled in. */
export type ResolvedSessionOptions = Required<
  Omit<BashSessionOptions, 'cleanEnv' | 'sandboxGid' | 'scrollbackBudget'>
> &
  Pick<BashSessionOptions, 'sandboxGid' | 'scrollbackBudget'>

/** Fills in the defaults of the optional settings. */
export function resolveSessionOptions(options: BashSessionOptions): ResolvedSessionOptions {
  return {
    killGraceMs: LIMITS.killGraceMs,
    scrollbackBytes: LIMITS.scrollbackBytes,
    outputCapBytes: LIMITS.outputCapBytes,
    maxCommandBytes: LIMITS.maxCommandBytes,
    bashPath: 'bash',
    oomCheck: () => false,
    ...options,
  }
}

/** The shell closed: code and signal from bash's exit, in words. */
export function describeExit(code: number | null, signal: string | null): ShellClosedInfo {
  if (signal !== null) return { code: null, signal, reason: `bash was killed by ${signal}` }
  return { code, signal: null, reason: `bash exited with code ${code ?? 'unknown'}` }
}
