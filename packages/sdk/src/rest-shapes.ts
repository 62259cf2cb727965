import type { ProcessOutput, RunResult } from '@conch/protocol'
import { type JsonSchema, type Shape, ShapeError, shapeOf } from '@conch/protocol/json-shape'
import type {
  AccessToken,
  ExposedPort,
  FileInfo,
  HistoryEntry,
  ListeningPort,
  PortEvent,
  ProcessInfo,
  SandboxInfo,
  SessionInfo,
  SnapshotInfo,
} from './resource-info.ts'
import type { TerminalInfo } from './terminal.ts'
import { EXEC_EVENT_SCHEMAS, REST_SCHEMAS } from './wire-schemas.ts'

// Validators of the runner's REST answers, from the protocol's own schemas (generated into
// wire-schemas.ts). Each is annotated with the SDK's type for that answer, which a type test
// holds equal to the protocol's; `rest-shapes.test.ts` checks that each accepts and rejects
// exactly what the protocol's zod schema does.

/** `ErrorBody`, with the code left open so a newer runner's codes still read. */
export const restErrorBody: Shape<{
  error: { code: string; message: string; details?: Record<string, unknown> }
}> = shapeOf(REST_SCHEMAS.errorBody)

/** `Ok`. */
export const okBody: Shape<{ ok: true }> = shapeOf(REST_SCHEMAS.ok)

/** `SandboxInfo`. */
export const sandboxInfo: Shape<SandboxInfo> = shapeOf(REST_SCHEMAS.sandboxInfo)

/** `SandboxList`. */
export const sandboxList: Shape<{ sandboxes: SandboxInfo[] }> = shapeOf(REST_SCHEMAS.sandboxList)

/** `AccessToken`. */
export const accessToken: Shape<AccessToken> = shapeOf(REST_SCHEMAS.accessToken)

/** `PortList`. */
export const portList: Shape<{ ports: ListeningPort[] }> = shapeOf(REST_SCHEMAS.portList)

/** `PortEvent`. */
export const portEvent: Shape<PortEvent> = shapeOf(REST_SCHEMAS.portEvent)

/** `ExposedPort`. */
export const exposedPort: Shape<ExposedPort> = shapeOf(REST_SCHEMAS.exposedPort)

/** `RunResult`. */
export const runResult: Shape<RunResult> = shapeOf(REST_SCHEMAS.runResult)

/** `SessionInfo`. */
export const sessionInfo: Shape<SessionInfo> = shapeOf(REST_SCHEMAS.sessionInfo)

/** `SessionList`. */
export const sessionList: Shape<{ sessions: SessionInfo[] }> = shapeOf(REST_SCHEMAS.sessionList)

/** `EnvMap`. */
export const envMap: Shape<{ env: Record<string, string> }> = shapeOf(REST_SCHEMAS.envMap)

/** `EnvValue`. */
export const envValue: Shape<{ name: string; value: string | null }> = shapeOf(REST_SCHEMAS.envValue)

/** `AliasMap`. */
export const aliasMap: Shape<{ aliases: Record<string, string> }> = shapeOf(REST_SCHEMAS.aliasMap)

/** `HistoryList`. */
export const historyList: Shape<{ entries: HistoryEntry[] }> = shapeOf(REST_SCHEMAS.historyList)

/** `ProcessInfo`. */
export const processInfo: Shape<ProcessInfo> = shapeOf(REST_SCHEMAS.processInfo)

/** `ProcessList`. */
export const processList: Shape<{ processes: ProcessInfo[] }> = shapeOf(REST_SCHEMAS.processList)

/** `ProcessOutput`. */
export const processOutput: Shape<ProcessOutput> = shapeOf(REST_SCHEMAS.processOutput)

/** `FileInfo`. */
export const fileInfo: Shape<FileInfo> = shapeOf(REST_SCHEMAS.fileInfo)

/** `FileList`. */
export const fileList: Shape<{ entries: FileInfo[] }> = shapeOf(REST_SCHEMAS.fileList)

/** One NDJSON line of a process stream. */
type ExecLine =
  | { type: 'stdout' | 'stderr'; data: string; offset: number }
  | { type: 'exit'; exitCode: number; timedOut: boolean; durationMs: number; oomKilled?: boolean }
  | { type: 'error'; code: string; message: string }

/** One checker per event type, made once (it compiles its schema on first use, once). */
const EXEC_EVENTS: Readonly<Record<string, Shape<ExecLine>>> = Object.fromEntries(
  Object.entries(EXEC_EVENT_SCHEMAS).map(([type, schema]: [string, JsonSchema]) => [type, shapeOf(schema)]),
)

/** One NDJSON line of a process stream (`ExecEvent`), picked by its `type`, with the error code left open. */
export const execEvent: Shape<ExecLine> = (value, path) => {
  const type = typeof value === 'object' && value !== null && 'type' in value ? value.type : undefined
  const shape = typeof type === 'string' && Object.hasOwn(EXEC_EVENTS, type) ? EXEC_EVENTS[type] : undefined
  if (!shape) throw new ShapeError(path ? `${path}.type` : 'type', Object.keys(EXEC_EVENTS).join(' | '))
  return shape(value, path)
}

/** `SnapshotInfo`. */
export const snapshotInfo: Shape<SnapshotInfo> = shapeOf(REST_SCHEMAS.snapshotInfo)

/** `SnapshotList`. */
export const snapshotList: Shape<{ snapshots: SnapshotInfo[] }> = shapeOf(REST_SCHEMAS.snapshotList)
/** `TerminalInfo`. */
export const terminalInfo: Shape<TerminalInfo> = shapeOf(REST_SCHEMAS.terminalInfo)

/** `TerminalList`. */
export const terminalList: Shape<{ terminals: TerminalInfo[] }> = shapeOf(REST_SCHEMAS.terminalList)
