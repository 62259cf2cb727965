import type { z } from 'zod'
import { ErrorBody } from './error-codes.ts'
import { FileInfo } from './file.ts'
import { ProcessInfo, ProcessOptions, ProcessOutput } from './process.ts'
import {
  AliasMap,
  EnvMap,
  EnvValue,
  ExecRequest,
  FileContent,
  FileList,
  Health,
  HistoryList,
  HistoryParams,
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
  WaitRequest,
} from './rest-bodies.ts'
import { RunResult } from './run-result.ts'
import { AccessToken, CreateSandboxRequest, CreateTokenRequest, SandboxInfo } from './sandbox.ts'
import { HistoryQuery, SessionInfo, SessionOptions } from './session.ts'
import {
  TerminalInfo,
  TerminalList,
  TerminalOptions,
  TerminalParams,
  TerminalSignalRequest,
  TerminalSize,
} from './terminal.ts'

/** One REST route: the runner registers it, and the OpenAPI document is generated from it. */
export interface ApiRoute {
  /** HTTP method. */
  method: 'GET' | 'POST' | 'PUT' | 'DELETE'
  /** fastify-style path with `:params`. */
  path: string
  /** Stable name, used as the OpenAPI operationId and by the runner to bind a handler. */
  operationId: string
  /** One-line summary for the docs. */
  summary: string
  /** Path parameters. */
  params?: z.ZodType
  /** Query string. */
  query?: z.ZodType
  /** JSON body; absent for raw-byte bodies. */
  body?: z.ZodType
  /** JSON answer; absent for raw bytes or NDJSON. */
  response?: z.ZodType
  /** Content type of a non-JSON answer. */
  produces?: string
  /** Content type of a non-JSON body. */
  consumes?: string
  /** Needs no auth (health checks only). */
  public?: boolean
}

const S = '/v1/sandboxes/:id'
const SS = `${S}/sessions/:sessionId`

/** Every REST route of the runner. */
export const API_ROUTES = [
  {
    method: 'GET',
    path: '/healthz',
    operationId: 'health',
    summary: 'Liveness',
    response: Health,
    public: true,
  },
  {
    method: 'GET',
    path: '/readyz',
    operationId: 'ready',
    summary: 'Readiness',
    response: Health,
    public: true,
  },
  {
    method: 'POST',
    path: '/v1/sandboxes',
    operationId: 'createSandbox',
    summary: 'Create a sandbox',
    body: CreateSandboxRequest,
    response: SandboxInfo,
  },
  {
    method: 'GET',
    path: '/v1/sandboxes',
    operationId: 'listSandboxes',
    summary: 'List sandboxes',
    response: SandboxList,
  },
  {
    method: 'GET',
    path: S,
    operationId: 'getSandbox',
    summary: 'Get a sandbox',
    params: SandboxParams,
    response: SandboxInfo,
  },
  {
    method: 'DELETE',
    path: S,
    operationId: 'destroySandbox',
    summary: 'Destroy a sandbox and everything in it',
    params: SandboxParams,
    response: Ok,
  },
  {
    method: 'POST',
    path: `${S}/tokens`,
    operationId: 'createToken',
    summary: 'Mint a sandbox-scoped token',
    params: SandboxParams,
    body: CreateTokenRequest,
    response: AccessToken,
  },
  {
    method: 'POST',
    path: `${S}/exec`,
    operationId: 'exec',
    summary: 'Run one command (buffered, or NDJSON with stream: true)',
    params: SandboxParams,
    body: ExecRequest,
    response: RunResult,
  },
  {
    method: 'POST',
    path: `${S}/sessions`,
    operationId: 'createSession',
    summary: 'Create a session (a new bash)',
    params: SandboxParams,
    body: SessionOptions,
    response: SessionInfo,
  },
  {
    method: 'GET',
    path: `${S}/sessions`,
    operationId: 'listSessions',
    summary: 'List sessions',
    params: SandboxParams,
    response: SessionList,
  },
  {
    method: 'GET',
    path: SS,
    operationId: 'getSession',
    summary: 'Get a session',
    params: SessionParams,
    response: SessionInfo,
  },
  {
    method: 'DELETE',
    path: SS,
    operationId: 'deleteSession',
    summary: 'Delete a session (kills its bash)',
    params: SessionParams,
    response: Ok,
  },
  {
    method: 'POST',
    path: `${SS}/run`,
    operationId: 'runInSession',
    summary: "Run a command in the session's shell, buffered",
    params: SessionParams,
    body: SessionRunRequest,
    response: RunResult,
  },
  {
    method: 'POST',
    path: `${SS}/interrupt`,
    operationId: 'interruptSession',
    summary: 'Ctrl-C for the running command',
    params: SessionParams,
    response: Ok,
  },
  {
    method: 'GET',
    path: `${SS}/env`,
    operationId: 'listEnv',
    summary: "The shell's exported variables",
    params: SessionParams,
    response: EnvMap,
  },
  {
    method: 'GET',
    path: `${SS}/env/:name`,
    operationId: 'getEnv',
    summary: 'One variable',
    params: NamedParams,
    response: EnvValue,
  },
  {
    method: 'PUT',
    path: `${SS}/env/:name`,
    operationId: 'setEnv',
    summary: 'Export a variable in the shell',
    params: NamedParams,
    body: SetValueRequest,
    response: Ok,
  },
  {
    method: 'DELETE',
    path: `${SS}/env/:name`,
    operationId: 'unsetEnv',
    summary: 'Unset a variable in the shell',
    params: NamedParams,
    response: Ok,
  },
  {
    method: 'GET',
    path: `${SS}/aliases`,
    operationId: 'listAliases',
    summary: "The shell's aliases",
    params: SessionParams,
    response: AliasMap,
  },
  {
    method: 'PUT',
    path: `${SS}/aliases/:name`,
    operationId: 'addAlias',
    summary: 'Define an alias',
    params: NamedParams,
    body: SetValueRequest,
    response: Ok,
  },
  {
    method: 'DELETE',
    path: `${SS}/aliases/:name`,
    operationId: 'removeAlias',
    summary: 'Remove an alias',
    params: NamedParams,
    response: Ok,
  },
  {
    method: 'GET',
    path: `${SS}/history`,
    operationId: 'history',
    summary: 'Search the commands run in the session',
    params: SessionParams,
    query: HistoryQuery,
    response: HistoryList,
  },
  {
    method: 'POST',
    path: `${SS}/history/:index/replay`,
    operationId: 'replayHistory',
    summary: 'Run a history entry again',
    params: HistoryParams,
    response: RunResult,
  },
  {
    method: 'POST',
    path: `${S}/processes`,
    operationId: 'startProcess',
    summary: 'Start a background process',
    params: SandboxParams,
    body: ProcessOptions,
    response: ProcessInfo,
  },
  {
    method: 'GET',
    path: `${S}/processes`,
    operationId: 'listProcesses',
    summary: 'List background processes',
    params: SandboxParams,
    response: ProcessList,
  },
  {
    method: 'GET',
    path: `${S}/processes/:processId`,
    operationId: 'getProcess',
    summary: 'Get a background process',
    params: ProcessParams,
    response: ProcessInfo,
  },
  {
    method: 'GET',
    path: `${S}/processes/:processId/output`,
    operationId: 'processOutput',
    summary: 'Output since an offset',
    params: ProcessParams,
    query: ProcessOutputQuery,
    response: ProcessOutput,
  },
  {
    method: 'GET',
    path: `${S}/processes/:processId/stream`,
    operationId: 'streamProcess',
    summary: 'Live output as NDJSON ExecEvents',
    params: ProcessParams,
    query: ProcessOutputQuery,
    produces: 'application/x-ndjson',
  },
  {
    method: 'POST',
    path: `${S}/processes/:processId/kill`,
    operationId: 'killProcess',
    summary: 'SIGTERM the process tree, SIGKILL after 3 s',
    params: ProcessParams,
    body: KillRequest,
    response: ProcessInfo,
  },
  {
    method: 'POST',
    path: `${S}/processes/:processId/wait`,
    operationId: 'waitProcess',
    summary: 'Wait for the process to end',
    params: ProcessParams,
    body: WaitRequest,
    response: ProcessInfo,
  },
  {
    method: 'GET',
    path: `${S}/files`,
    operationId: 'readFile',
    summary: 'Read a file (raw bytes, or JSON with ?encoding=)',
    params: SandboxParams,
    query: PathQuery,
    produces: 'application/octet-stream',
    response: FileContent,
  },
  {
    method: 'PUT',
    path: `${S}/files`,
    operationId: 'writeFile',
    summary: 'Write a file from the raw request body',
    params: SandboxParams,
    query: PathQuery,
    consumes: 'application/octet-stream',
    response: FileInfo,
  },
  {
    method: 'GET',
    path: `${S}/files/list`,
    operationId: 'listFiles',
    summary: 'List a directory',
    params: SandboxParams,
    query: PathQuery,
    response: FileList,
  },
  {
    method: 'GET',
    path: `${S}/files/stat`,
    operationId: 'statFile',
    summary: 'Stat a path',
    params: SandboxParams,
    query: PathQuery,
    response: FileInfo,
  },
  {
    method: 'POST',
    path: `${S}/files/mkdir`,
    operationId: 'mkdir',
    summary: 'Create a directory',
    params: SandboxParams,
    body: MkdirRequest,
    response: FileInfo,
  },
  {
    method: 'POST',
    path: `${S}/files/remove`,
    operationId: 'removeFile',
    summary: 'Remove a path',
    params: SandboxParams,
    body: RemoveRequest,
    response: Ok,
  },
  {
    method: 'POST',
    path: `${S}/files/rename`,
    operationId: 'renameFile',
    summary: 'Rename a path',
    params: SandboxParams,
    body: RenameRequest,
    response: FileInfo,
  },
  {
    method: 'POST',
    path: `${S}/terminals`,
    operationId: 'createTerminal',
    summary: 'Open a terminal (a program on a pty); attach to it on its socket',
    params: SandboxParams,
    body: TerminalOptions,
    response: TerminalInfo,
  },
  {
    method: 'GET',
    path: `${S}/terminals`,
    operationId: 'listTerminals',
    summary: 'List terminals',
    params: SandboxParams,
    response: TerminalList,
  },
  {
    method: 'GET',
    path: `${S}/terminals/:terminalId`,
    operationId: 'getTerminal',
    summary: 'Get a terminal',
    params: TerminalParams,
    response: TerminalInfo,
  },
  {
    method: 'DELETE',
    path: `${S}/terminals/:terminalId`,
    operationId: 'deleteTerminal',
    summary: 'Close a terminal (SIGHUP, then SIGKILL)',
    params: TerminalParams,
    response: Ok,
  },
  {
    method: 'POST',
    path: `${S}/terminals/:terminalId/resize`,
    operationId: 'resizeTerminal',
    summary: 'Resize a terminal',
    params: TerminalParams,
    body: TerminalSize,
    response: TerminalInfo,
  },
  {
    method: 'POST',
    path: `${S}/terminals/:terminalId/signal`,
    operationId: 'signalTerminal',
    summary: "Send a signal to a terminal's program",
    params: TerminalParams,
    body: TerminalSignalRequest,
    response: Ok,
  },
] as const satisfies readonly ApiRoute[]

/** The `operationId` of every route. */
export type OperationId = (typeof API_ROUTES)[number]['operationId']

/** Body of every error answer, for the OpenAPI document. */
export const API_ERROR_BODY = ErrorBody
