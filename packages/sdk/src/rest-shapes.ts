import type { ProcessOutput, RunResult } from '@conch/protocol'
import type {
  AccessToken,
  FileInfo,
  HistoryEntry,
  ProcessInfo,
  SandboxInfo,
  SessionInfo,
} from './resource-info.ts'
import {
  arr,
  bool,
  literal,
  nullable,
  num,
  obj,
  oneOf,
  opt,
  record,
  type Shape,
  str,
  unknownValue,
} from './wire-shape.ts'

// Shapes of the runner's REST answers, mirroring `rest-bodies.ts` and the models it uses.
// Each is annotated with the protocol's inferred type, so a field the protocol grows or
// renames is a type error here; `rest-shapes.test.ts` checks that they accept and reject
// exactly what the protocol's schemas do.

const int = num({ int: true })
const nonNegInt = num({ int: true, min: 0 })
const timestamp = nonNegInt
const offset = nonNegInt
const encoding = oneOf(['utf8', 'base64'])
const sandboxId = str({ pattern: /^sb_[A-Za-z0-9]{8,40}$/ })
const sessionId = str({ pattern: /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/ })
const runId = str({ min: 1, max: 128 })
const processStatus = oneOf(['running', 'exited', 'killed'])

/** `ErrorBody`, with the code left open so a newer runner's codes still read. */
export const restErrorBody: Shape<{
  error: { code: string; message: string; details?: Record<string, unknown> }
}> = obj({ error: obj({ code: str(), message: str(), details: opt(record(unknownValue)) }) })

/** `Ok`. */
export const okBody: Shape<{ ok: true }> = obj({ ok: literal(true) })

const limits = obj({
  memoryBytes: opt(num({ int: true, min: 1 })),
  cpus: opt(num({ min: Number.MIN_VALUE, max: 256 })),
  pids: opt(num({ int: true, min: 1 })),
  diskBytes: opt(num({ int: true, min: 1 })),
})

/** `SandboxInfo`. */
export const sandboxInfo: Shape<SandboxInfo> = obj({
  id: sandboxId,
  status: oneOf(['starting', 'running', 'unreachable', 'dead', 'destroyed']),
  driver: str(),
  isolation: oneOf(['none', 'namespace', 'vm']),
  description: str(),
  workdir: str(),
  limits,
  metadata: record(str()),
  createdAt: timestamp,
  deadReason: nullable(str()),
  usage: opt(
    nullable(
      obj({
        memoryBytes: nonNegInt,
        memoryPeakBytes: nullable(nonNegInt),
        cpuSeconds: num({ min: 0 }),
        pids: nonNegInt,
        oomKills: nonNegInt,
      }),
    ),
  ),
})

/** `SandboxList`. */
export const sandboxList: Shape<{ sandboxes: SandboxInfo[] }> = obj({ sandboxes: arr(sandboxInfo) })

/** `AccessToken`. */
export const accessToken: Shape<AccessToken> = obj({ token: str(), sandboxId, expiresAt: timestamp })

/** `RunResult`. */
export const runResult: Shape<RunResult> = obj({
  stdout: str(),
  stderr: str(),
  encoding,
  exitCode: num({ int: true, min: 0, max: 255 }),
  timedOut: bool,
  truncated: bool,
  stdoutBytes: nonNegInt,
  stderrBytes: nonNegInt,
  durationMs: num({ min: 0 }),
  oomKilled: opt(bool),
})

/** `SessionInfo`. */
export const sessionInfo: Shape<SessionInfo> = obj({
  id: sessionId,
  status: oneOf(['open', 'closed']),
  cwd: str(),
  commandTimeoutMs: int,
  cleanEnv: bool,
  pid: nullable(int),
  createdAt: timestamp,
  offset,
  running: nullable(runId),
  queued: nonNegInt,
  closed: nullable(obj({ code: nullable(int), signal: nullable(str()), reason: str() })),
})

/** `SessionList`. */
export const sessionList: Shape<{ sessions: SessionInfo[] }> = obj({ sessions: arr(sessionInfo) })

/** `EnvMap`. */
export const envMap: Shape<{ env: Record<string, string> }> = obj({ env: record(str()) })

/** `EnvValue`. */
export const envValue: Shape<{ name: string; value: string | null }> = obj({
  name: str({ pattern: /^[A-Za-z_][A-Za-z0-9_]*$/ }),
  value: nullable(str()),
})

/** `AliasMap`. */
export const aliasMap: Shape<{ aliases: Record<string, string> }> = obj({ aliases: record(str()) })

const historyEntry: Shape<HistoryEntry> = obj({
  index: nonNegInt,
  command: str(),
  startedAt: timestamp,
  exitCode: nullable(int),
  durationMs: nullable(num()),
})

/** `HistoryList`. */
export const historyList: Shape<{ entries: HistoryEntry[] }> = obj({ entries: arr(historyEntry) })

/** `ProcessInfo`. */
export const processInfo: Shape<ProcessInfo> = obj({
  id: str({ pattern: /^proc_[A-Za-z0-9]{4,40}$/ }),
  pid: int,
  command: str(),
  status: processStatus,
  exitCode: nullable(int),
  signal: nullable(str()),
  startedAt: timestamp,
  endedAt: nullable(timestamp),
  offset,
})

/** `ProcessList`. */
export const processList: Shape<{ processes: ProcessInfo[] }> = obj({ processes: arr(processInfo) })

/** `ProcessOutput`. */
export const processOutput: Shape<ProcessOutput> = obj({
  stdout: str(),
  stderr: str(),
  encoding,
  nextOffset: offset,
  status: processStatus,
})

/** `FileInfo`. */
export const fileInfo: Shape<FileInfo> = obj({
  path: str(),
  name: str(),
  type: oneOf(['file', 'directory', 'symlink', 'other']),
  size: nonNegInt,
  mode: int,
  mtimeMs: timestamp,
})

/** `FileList`. */
export const fileList: Shape<{ entries: FileInfo[] }> = obj({ entries: arr(fileInfo) })

/** One NDJSON line of a process stream (`ExecEvent`), with the error code left open. */
export const execEvent: Shape<
  | { type: 'stdout' | 'stderr'; data: string; offset: number }
  | { type: 'exit'; exitCode: number; timedOut: boolean; durationMs: number; oomKilled?: boolean }
  | { type: 'error'; code: string; message: string }
> = (value, path) => {
  const type = obj({ type: oneOf(['stdout', 'stderr', 'exit', 'error']) })(value, path).type
  if (type === 'exit') {
    return obj({
      type: literal('exit'),
      exitCode: int,
      timedOut: bool,
      durationMs: num({ min: 0 }),
      oomKilled: opt(bool),
    })(value, path)
  }
  if (type === 'error') return obj({ type: literal('error'), code: str(), message: str() })(value, path)
  return obj({ type: oneOf(['stdout', 'stderr']), data: str(), offset })(value, path)
}
