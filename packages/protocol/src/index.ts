export { AgentArgs } from './agent-args.ts'
export {
  AGENT_FRAME_TYPES,
  AgentCredit,
  AgentData,
  AgentEnd,
  AgentError,
  AgentFail,
  AgentFrame,
  AgentHello,
  AgentResult,
  AgentScrollbackEnd,
  AgentSessionClosed,
  AgentShellClosed,
  AgentShellErr,
  AgentShellExit,
  AgentShellOut,
  AgentShellStart,
  ChannelId,
  HOST_FRAME_TYPES,
  HostAuth,
  HostCall,
  HostCloseChannel,
  HostCredit,
  HostData,
  HostEnd,
  HostFrame,
  HostHello,
  LinkNonce,
  LinkPing,
  LinkPong,
  LinkProof,
} from './agent-frames.ts'
export {
  AGENT_ENV_PREFIX,
  AGENT_NODE_FLAGS,
  agentCommand,
  argvToRecord,
  compileCacheFlag,
  WORKSPACE_PATH,
} from './agent-launch.ts'
export {
  AGENT_DATA_ENCODING,
  AGENT_METHODS,
  type AgentMethod,
  type AgentParams,
  type AgentResultOf,
  ExecParams,
  isAgentMethod,
  SessionAttachParams,
  SessionRunParams,
} from './agent-methods.ts'
export {
  AGENT_ERROR_CODES,
  AgentWireError,
  boundedAgentError,
  MAX_AGENT_ERROR_MESSAGE_CHARS,
} from './agent-wire-error.ts'
export { API_ERROR_BODY, API_ROUTES, type ApiRoute, type OperationId } from './api-routes.ts'
export { assertNever } from './assert-never.ts'
export { API_KEY_PREFIX, BEARER_SUBPROTOCOL_PREFIX, SANDBOX_TOKEN_PREFIX, SHELL_SUBPROTOCOL } from './auth.ts'
export { BenchGoal, BenchReport, BenchResult } from './bench-results.ts'
export { boundedErrorDetails, MAX_ERROR_DETAILS_BYTES } from './bounded-error-details.ts'
export {
  CLIENT_FRAME_TYPES,
  ClientFrame,
  ClientHello,
  ErrorFrame,
  Ping,
  Pong,
  ScrollbackEnd,
  SERVER_FRAME_TYPES,
  ServerFrame,
  ServerHello,
  ShellAck,
  ShellClosed,
  ShellErr,
  ShellExit,
  ShellInterrupt,
  ShellOut,
  ShellQuery,
  ShellReady,
  ShellRun,
  ShellStart,
  ShellStdin,
} from './client-frames.ts'
export { CodedError, type CodedErrorOptions } from './coded-error.ts'
export { DEFAULT_SESSION_ID } from './default-session.ts'
export { ErrorBody, ErrorCode, WireError } from './error-codes.ts'
export {
  AgentUnavailableDetails,
  BadRequestDetails,
  ConnectionLostDetails,
  ERROR_DETAILS,
  type ErrorDetails,
  ForbiddenDetails,
  FrameTooLargeDetails,
  InternalDetails,
  LimitDetails,
  NoDetails,
  OutputLostDetails,
  PathDetails,
  ProcessNotFoundDetails,
  RunnerUnavailableDetails,
  SandboxNotFoundDetails,
  SessionDetails,
  ShellClosedDetails,
  UnauthorizedDetails,
} from './error-details.ts'
export { ERROR_STATUS } from './error-status.ts'
export { ERROR_SUGGESTIONS } from './error-suggestions.ts'
export { FileInfo, SandboxPath } from './file.ts'
export { type ParseResult, parseFrame, parseJsonFrame } from './frame-parse.ts'
export { clampTimeout, DEFAULT_SANDBOX_LIMITS, LIMITS } from './limits.ts'
export { isLinkHello, LINK_VERSION, linkVersionOf } from './link-version.ts'
export {
  EGRESS_PROXY_PORT,
  EgressCredentialName,
  EgressRule,
  ExposedPort,
  ExposePortRequest,
  ListeningPort,
  NetworkPolicy,
  PORT_TOKEN_COOKIE,
  PORT_TOKEN_PREFIX,
  PORT_TOKEN_QUERY,
  PortEvent,
  PortList,
  PortNumber,
  PortParams,
  PortSegment,
} from './network.ts'
export { buildOpenApiDocument } from './openapi.ts'
export {
  decodeOutputFrame,
  encodeOutputFrame,
  encodeOutputHeader,
  MAX_OUTPUT_FRAME_ID_BYTES,
  OUTPUT_FRAME_HEADER_BYTES,
  OUTPUT_FRAME_KIND,
  type OutputFrame,
  type OutputFrameRead,
} from './output-frame.ts'
export {
  Encoding,
  Env,
  EnvName,
  Offset,
  RunId,
  SandboxId,
  SessionId,
  StreamName,
  TimeoutMs,
  Timestamp,
} from './primitives.ts'
export { ProcessId, ProcessInfo, ProcessOptions, ProcessOutput } from './process.ts'
export {
  AliasMap,
  EnvMap,
  EnvValue,
  ExecEvent,
  ExecRequest,
  FileContent,
  FileList,
  Health,
  HistoryList,
  HistoryParams,
  isBase64,
  KillRequest,
  MkdirRequest,
  NamedParams,
  Ok,
  PathQuery,
  ProcessList,
  ProcessOutputQuery,
  ProcessParams,
  RemoveRequest,
  RenameRequest,
  SandboxList,
  SandboxParams,
  SessionList,
  SessionParams,
  SessionRunRequest,
  SetValueRequest,
  SnapshotList,
  SnapshotParams,
  SnapshotRequest,
  StartProcessRequest,
  WaitRequest,
} from './rest-bodies.ts'
export { RunResult } from './run-result.ts'
export {
  AccessToken,
  BoundedEnv,
  CreateSandboxRequest,
  CreateTokenRequest,
  Isolation,
  KeepAliveRequest,
  SANDBOX_BOUNDS,
  SandboxInfo,
  SandboxLimits,
  SandboxStatus,
} from './sandbox.ts'
export { MAX_SHARD_NAME_LENGTH, ShardName, shardedSandboxId, shardOfSandboxId } from './sandbox-shard.ts'
export { SandboxUsage } from './sandbox-usage.ts'
export {
  HistoryEntry,
  HistoryQuery,
  SessionInfo,
  SessionOptions,
  ShellClosedInfo,
} from './session.ts'
export {
  RestoredSession,
  SandboxShellState,
  ShellFunction,
  ShellState,
  ShellVariable,
  SNAPSHOT_FORMAT_VERSION,
  SnapshotId,
  SnapshotInfo,
  SnapshotProcess,
} from './snapshot.ts'
export {
  decodeTerminalOutput,
  encodeTerminalOutput,
  encodeTerminalOutputHeader,
  TERMINAL_OUTPUT_HEADER_BYTES,
  TERMINAL_SIZE_LIMITS,
  TERMINAL_SUBPROTOCOL,
  TerminalAttachment,
  TerminalClientFrame,
  TerminalCols,
  TerminalExitFrame,
  TerminalId,
  TerminalInfo,
  TerminalList,
  TerminalOptions,
  TerminalParams,
  TerminalPongFrame,
  TerminalQuery,
  TerminalReadyFrame,
  TerminalReplayEndFrame,
  TerminalRows,
  TerminalSignal,
  TerminalSignalRequest,
  TerminalSize,
} from './terminal.ts'
export { REDACTED, redactUrl } from './url-redaction.ts'
export { CAPABILITIES, Capability, PROTOCOL_VERSION } from './version.ts'
