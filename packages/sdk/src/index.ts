export {
  BackgroundProcess,
  type ProcessEvent,
  type ProcessOutputChunk,
} from './background-process.ts'
export type { CommandResult, OutputEncoding, OutputOf } from './command-result.ts'
export {
  AuthError,
  ConchError,
  type ConchErrorOptions,
  ConnectionError,
  DeadlineError,
  OutputLostError,
  RateLimitError,
  SandboxNotFoundError,
  SessionNotFoundError,
  ShellClosedError,
} from './conch-error.ts'
export type { ErrorCode } from './error-code.ts'
export type {
  AgentUnavailableDetails,
  BadRequestDetails,
  ConnectionLostDetails,
  ErrorDetails,
  LimitDetails,
  OutputLostDetails,
  PathDetails,
  RunnerUnavailableDetails,
  SessionDetails,
  ShellClosedDetails,
  UnauthorizedDetails,
} from './error-details.ts'
export type { PipedRun } from './piped-run.ts'
export type {
  AccessToken,
  ExposedPort,
  FileInfo,
  HistoryEntry,
  ListeningPort,
  PortEvent,
  ProcessInfo,
  SandboxInfo,
  SandboxLimits,
  SandboxUsage,
  SessionInfo,
  ShellClosedInfo,
  SnapshotInfo,
} from './resource-info.ts'
export type { RetryPolicy } from './retry-policy.ts'
export { Sandbox } from './sandbox.ts'
export { SandboxFiles } from './sandbox-files.ts'
export type {
  ConnectOptions,
  CreateSandboxOptions,
  ExposePortOptions,
  ReattachOptions,
  SandboxExecOptions,
  SessionOptions,
  ShellOptions,
  StartProcessOptions,
} from './sandbox-options.ts'
export { type ExecOptions, type HistoryQuery, Session } from './session.ts'
export { SessionAliases } from './session-aliases.ts'
export { SessionEnv } from './session-env.ts'
export { Shell } from './shell.ts'
export type { ConnectionPolicy } from './shell-connection.ts'
export type { ShellResumed } from './shell-frame-router.ts'
export type { ShellEvent, ShellOutput, ShellRunOptions } from './shell-run-options.ts'
export {
  Terminal,
  type TerminalExit,
  type TerminalInfo,
  type TerminalOptions,
  type TerminalSignalName,
} from './terminal.ts'
export type { FetchLike, WebSocketConstructor, WebSocketLike } from './web-socket-like.ts'
