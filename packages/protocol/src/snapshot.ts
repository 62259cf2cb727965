import { z } from 'zod'
import { Env, SessionId, Timestamp } from './primitives.ts'
import { HistoryEntry } from './session.ts'

// A snapshot of a sandbox: what its shells and processes were (captured by the agent), and
// its workspace (captured by the runner into a content-addressed store). Every string in the
// shell state was produced by code inside the sandbox, so it is data, never trusted: the
// agent re-validates it before it writes a restore script, and that script runs only in the
// restored sandbox's own shell.

/** The version of the snapshot format; a runner refuses snapshots of another major version. */
export const SNAPSHOT_FORMAT_VERSION = 1

/** A snapshot id: `snap_` and 20 base62 characters. */
export const SnapshotId = z.string().regex(/^snap_[A-Za-z0-9]{20}$/)
/** A snapshot id. */
export type SnapshotId = z.infer<typeof SnapshotId>

/** A shell variable as bash's `declare -p` printed it. */
export const ShellVariable = z.object({
  /** The variable's name. */
  name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/),
  /** `declare -<flags> name=value` exactly as bash quoted it. */
  declaration: z.string().max(1_048_576),
})
/** A shell variable. */
export type ShellVariable = z.infer<typeof ShellVariable>

/** A shell function as bash's `declare -pf` printed it (definition, then its attributes). */
export const ShellFunction = z.object({
  /** The function's name. */
  name: z.string().min(1).max(256),
  /** The definition text. */
  definition: z.string().max(1_048_576),
})
/** A shell function. */
export type ShellFunction = z.infer<typeof ShellFunction>

/** The state of one session's shell, captured between runs. */
export const ShellState = z.object({
  /** The session's id; a restored session keeps it. */
  id: SessionId,
  /** Default timeout of the session's runs. */
  commandTimeoutMs: z.number().int().positive(),
  /** Whether it started from an empty environment. */
  cleanEnv: z.boolean(),
  /** The working directory; a workspace path is written as `/workspace/...`. */
  cwd: z.string().max(4096),
  /** `OLDPWD` (where `cd -` goes), or null when unset; written like `cwd`. */
  oldPwd: z.string().max(4096).nullable(),
  /** The directory stack below the cwd (`DIRSTACK[1..]`), in `dirs` order. */
  dirStack: z.array(z.string().max(4096)).max(256),
  /** The file mode creation mask, four octal digits. */
  umask: z.string().regex(/^[0-7]{3,4}$/),
  /** Variables, exported and not, with their attributes; bash's own and the framing's are left out. */
  variables: z.array(ShellVariable).max(10_000),
  /** Functions; the framing's are left out. */
  functions: z.array(ShellFunction).max(10_000),
  /** Aliases as `[name, value]` pairs. */
  aliases: z.array(z.tuple([z.string().max(256), z.string().max(65_536)])).max(10_000),
  /** `set -o` options that were on. */
  setOptions: z.array(z.string().regex(/^[a-z-]{1,32}$/)).max(64),
  /** `shopt` options that were on. */
  shoptOptions: z.array(z.string().regex(/^[a-z_0-9]{1,32}$/)).max(128),
  /** Traps as bash's `trap -p` printed them. */
  traps: z.string().max(1_048_576),
  /** The session's command history, oldest first. */
  history: z.array(HistoryEntry).max(10_000),
  /** `$?` after the last run. */
  lastExitCode: z.number().int().min(0).max(255),
})
/** One session's shell state. */
export type ShellState = z.infer<typeof ShellState>

/** A background process as a snapshot lists it: enough to start it again. */
export const SnapshotProcess = z.object({
  /** The command line it ran (`bash -c`). */
  command: z.string(),
  /** Its working directory; a workspace path is written as `/workspace/...`. */
  cwd: z.string(),
  /** Its environment. */
  env: Env,
  /** Whether it was still running when the snapshot was taken. */
  running: z.boolean(),
})
/** A listed background process. */
export type SnapshotProcess = z.infer<typeof SnapshotProcess>

/** What the agent captures: every open session's shell and every background process. */
export const SandboxShellState = z.object({
  /** Open sessions, in creation order. */
  sessions: z.array(ShellState).max(1024),
  /** Background processes. */
  processes: z.array(SnapshotProcess).max(1024),
})
/** The agent's part of a snapshot. */
export type SandboxShellState = z.infer<typeof SandboxShellState>

/** How one session came back from a snapshot. */
export const RestoredSession = z.object({
  /** Session id. */
  id: SessionId,
  /** Pieces of state bash refused, in words (empty when everything came back). */
  problems: z.array(z.string()),
})
/** A restored session. */
export type RestoredSession = z.infer<typeof RestoredSession>

/** A stored snapshot as the API lists it. */
export const SnapshotInfo = z.object({
  /** Snapshot id. */
  id: SnapshotId,
  /** The name given when it was taken, if any. */
  name: z.string().nullable(),
  /** The sandbox it was taken from. */
  sandboxId: z.string(),
  /** When it was taken. */
  createdAt: Timestamp,
  /** Format version. */
  formatVersion: z.number().int(),
  /** Sessions it holds. */
  sessions: z.array(SessionId),
  /** Files, directories and links in its workspace. */
  entries: z.number().int().nonnegative(),
  /** Bytes of the workspace's files before compression. */
  workspaceBytes: z.number().int().nonnegative(),
  /** Bytes this snapshot added to the store (what it did not share with earlier snapshots). */
  storedBytes: z.number().int().nonnegative(),
  /** Background processes it lists (restart them with `restartProcesses`). */
  processes: z.array(SnapshotProcess.pick({ command: true, cwd: true, running: true })),
})
/** A stored snapshot. */
export type SnapshotInfo = z.infer<typeof SnapshotInfo>
