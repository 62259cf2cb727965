import { z } from 'zod'
import { ChannelId } from './agent-frames.ts'
import { FileInfo, SandboxPath } from './file.ts'
import { LIMITS } from './limits.ts'
import { ListeningPort, PortNumber } from './network.ts'
import { type Encoding, Env, EnvName, Offset, RunId, SessionId, TimeoutMs } from './primitives.ts'
import { ProcessId, ProcessInfo, ProcessOptions } from './process.ts'
import { RunResult } from './run-result.ts'
import { HistoryEntry, HistoryQuery, SessionInfo, SessionOptions } from './session.ts'
import { RestoredSession, SandboxShellState } from './snapshot.ts'
import {
  TerminalAttachment,
  TerminalId,
  TerminalInfo,
  TerminalOptions,
  TerminalSignal,
  TerminalSize,
} from './terminal.ts'

// The methods a runner may call on an agent, each with its params and result schemas.
// Byte data inside JSON (stdin, buffered output, small file contents) is base64; large
// data flows as raw payloads on channels.

const session = { sessionId: SessionId }
const empty = z.object({})
const ok = z.object({})

/** Run a command in a session's shell. Unknown sessions are created with defaults. */
export const SessionRunParams = z.object({
  ...session,
  /** Run id, unique among this session's runs in flight. */
  id: RunId,
  /** Command text. */
  command: z.string(),
  /** Timeout after clamping by the runner; the agent applies the session default when absent. */
  timeoutMs: TimeoutMs.optional(),
  /** stdin bytes, base64. */
  stdin: z.string().optional(),
  /** true: the result is the buffered `RunResult` (base64). false: the result is `{}` once queued; output flows on attached channels. */
  buffer: z.boolean(),
  /** Output cap per stream for a buffered result. */
  outputCapBytes: z.number().int().positive().optional(),
  /** stdin is a pipe fed by `session.stdin` while the run is in flight (instead of `stdin` or /dev/null). */
  stdinPipe: z.boolean().optional(),
})
/** Session run parameters. */
export type SessionRunParams = z.infer<typeof SessionRunParams>

/** Attach a channel to a session's output log, replaying from `offset` (default: live only). */
export const SessionAttachParams = z.object({
  ...session,
  /** Channel to deliver on. */
  ch: ChannelId,
  /** Replay from this offset; OUTPUT_LOST when it was evicted. */
  offset: Offset.optional(),
})
/** The type `SessionAttachParams` parses to. */
export type SessionAttachParams = z.infer<typeof SessionAttachParams>

/** Start an exec; with `ch` its output streams on that channel and the result is `{}`. */
export const ExecParams = z.object({
  /** Command text for `bash -c`. */
  command: z.string(),
  /** Working directory. */
  cwd: z.string().optional(),
  /** Variables added to the base environment. */
  env: Env.optional(),
  /** stdin bytes, base64. */
  stdin: z.string().optional(),
  /** Timeout after clamping. */
  timeoutMs: TimeoutMs,
  /** Stream on this channel instead of buffering. */
  ch: ChannelId.optional(),
  /** Output cap per stream for a buffered result. */
  outputCapBytes: z.number().int().positive().optional(),
})
/** The type `ExecParams` parses to. */
export type ExecParams = z.infer<typeof ExecParams>

/** The agent's methods: name → params and result schemas. */
export const AGENT_METHODS = {
  'agent.info': {
    params: empty,
    result: z.object({
      pid: z.number().int(),
      agentVersion: z.string(),
      startedAt: z.number(),
      rssBytes: z.number(),
      /** V8 heap in use; after a full GC when the agent runs with `--expose-gc` (tests). */
      heapUsedBytes: z.number().optional(),
      sessions: z.number().int(),
      workdir: z.string(),
    }),
  },
  'session.create': { params: SessionOptions, result: SessionInfo },
  'session.list': { params: empty, result: z.object({ sessions: z.array(SessionInfo) }) },
  'session.get': { params: z.object(session), result: SessionInfo },
  'session.delete': { params: z.object(session), result: ok },
  'session.run': { params: SessionRunParams, result: z.union([RunResult, ok]) },
  'session.attach': { params: SessionAttachParams, result: SessionInfo },
  /** Writes to (or ends) the stdin pipe of a running run started with `stdinPipe`. */
  'session.stdin': {
    params: z.object({
      ...session,
      id: RunId,
      /** Bytes, base64. */
      data: z
        .string()
        .max(Math.ceil(LIMITS.maxStdinBytes / 3) * 4)
        .optional(),
      /** Close the pipe after the data: the command reads EOF. */
      end: z.boolean().optional(),
    }),
    result: ok,
  },
  'session.interrupt': { params: z.object({ ...session, id: RunId.optional() }), result: ok },
  'session.env.list': {
    params: z.object(session),
    result: z.object({ env: z.record(z.string(), z.string()) }),
  },
  'session.env.get': {
    params: z.object({ ...session, name: EnvName }),
    result: z.object({ value: z.string().nullable() }),
  },
  'session.env.set': { params: z.object({ ...session, name: EnvName, value: z.string() }), result: ok },
  'session.env.unset': { params: z.object({ ...session, name: EnvName }), result: ok },
  'session.alias.list': {
    params: z.object(session),
    result: z.object({ aliases: z.record(z.string(), z.string()) }),
  },
  'session.alias.add': {
    params: z.object({ ...session, name: z.string().regex(/^[^\s=/$`'"\\]+$/), value: z.string() }),
    result: ok,
  },
  'session.alias.remove': { params: z.object({ ...session, name: z.string() }), result: ok },
  'session.history': {
    params: z.object({ ...session, ...HistoryQuery.shape }),
    result: z.object({ entries: z.array(HistoryEntry) }),
  },
  'session.history.replay': {
    params: z.object({
      ...session,
      index: z.number().int().nonnegative(),
      id: RunId,
      outputCapBytes: z.number().int().positive().optional(),
    }),
    result: RunResult,
  },
  exec: { params: ExecParams, result: z.union([RunResult, ok]) },
  'process.start': { params: ProcessOptions, result: ProcessInfo },
  'process.list': { params: empty, result: z.object({ processes: z.array(ProcessInfo) }) },
  'process.get': { params: z.object({ id: ProcessId }), result: ProcessInfo },
  'process.output': {
    params: z.object({ id: ProcessId, since: Offset.optional() }),
    result: z.object({
      stdout: z.string(),
      stderr: z.string(),
      nextOffset: Offset,
      status: z.enum(['running', 'exited', 'killed']),
    }),
  },
  'process.stream': {
    params: z.object({ id: ProcessId, ch: ChannelId, since: Offset.optional() }),
    result: ok,
  },
  'process.kill': {
    params: z.object({
      id: ProcessId,
      signal: z.enum(['SIGTERM', 'SIGKILL', 'SIGINT', 'SIGHUP']).optional(),
    }),
    result: ProcessInfo,
  },
  'process.wait': {
    params: z.object({ id: ProcessId, timeoutMs: TimeoutMs.optional() }),
    result: ProcessInfo,
  },
  /**
   * Lets go of every host resource the link holds, for a live (`runsc checkpoint`) snapshot:
   * the agent answers, stops listening, removes its socket, drops this connection, writes
   * `suspended` in its link dir once the connection is closed, then waits for a new `secret`
   * file there, reads and deletes it as at start, and listens again with that secret.
   */
  'link.suspend': { params: empty, result: ok },
  'snapshot.capture': { params: empty, result: SandboxShellState },
  'snapshot.restore': {
    params: z.object({
      /** What `snapshot.capture` returned in the sandbox the snapshot was taken of. */
      state: SandboxShellState,
      /** Start again the background processes that were running. */
      restartProcesses: z.boolean(),
    }),
    result: z.object({ sessions: z.array(RestoredSession) }),
  },
  'terminal.open': { params: TerminalOptions, result: TerminalInfo },
  'terminal.list': { params: empty, result: z.object({ terminals: z.array(TerminalInfo) }) },
  'terminal.get': { params: z.object({ terminal: TerminalId }), result: TerminalInfo },
  /** Attach a channel: output from `offset` (default: the scrollback's start), then live; `data` frames on the channel are input. */
  'terminal.attach': {
    params: z.object({ terminal: TerminalId, ch: ChannelId, offset: Offset.optional() }),
    result: TerminalAttachment,
  },
  'terminal.resize': {
    params: z.object({ terminal: TerminalId, ...TerminalSize.shape }),
    result: TerminalInfo,
  },
  'terminal.signal': { params: z.object({ terminal: TerminalId, signal: TerminalSignal }), result: ok },
  /** Ends the program (SIGHUP, then SIGKILL) and forgets the terminal. */
  'terminal.close': { params: z.object({ terminal: TerminalId }), result: ok },
  'file.read': { params: z.object({ path: SandboxPath, ch: ChannelId }), result: FileInfo },
  'file.write': {
    params: z.object({ path: SandboxPath, ch: ChannelId, mode: z.number().int().optional() }),
    result: FileInfo,
  },
  'file.list': { params: z.object({ path: SandboxPath }), result: z.object({ entries: z.array(FileInfo) }) },
  'file.stat': { params: z.object({ path: SandboxPath }), result: FileInfo },
  'file.mkdir': {
    params: z.object({ path: SandboxPath, recursive: z.boolean().optional() }),
    result: FileInfo,
  },
  'file.remove': { params: z.object({ path: SandboxPath, recursive: z.boolean().optional() }), result: ok },
  'file.rename': { params: z.object({ from: SandboxPath, to: SandboxPath }), result: FileInfo },
  /** The sandbox's listening TCP sockets, from `/proc/net/tcp{,6}` of its namespace. */
  'ports.list': { params: empty, result: z.object({ ports: z.array(ListeningPort) }) },
  /**
   * Opens a TCP connection to 127.0.0.1:`port` inside the sandbox and relays it on `ch`: bytes
   * from the server arrive as `data` (stream `stdout`), bytes for it go as `data` frames from the
   * runner, acknowledged by the agent's `credit` once written. Resolves once connected;
   * PORT_NOT_LISTENING when nothing listens.
   */
  'tcp.connect': { params: z.object({ port: PortNumber, ch: ChannelId }), result: ok },
  /** Starts the sandbox's egress listener on 127.0.0.1:`port` inside it (once; later calls are no-ops). */
  'egress.listen': { params: z.object({ port: PortNumber }), result: ok },
  /**
   * Waits for the next connection to the egress listener and relays it on `ch` as `tcp.connect`
   * does. The runner keeps a few of these calls pending; each answers when a program connects.
   */
  'egress.accept': { params: z.object({ ch: ChannelId }), result: ok },
} as const

/** A method name. */
export type AgentMethod = keyof typeof AGENT_METHODS
/** The params type of a method. */
export type AgentParams<M extends AgentMethod> = z.infer<(typeof AGENT_METHODS)[M]['params']>
/** The result type of a method. */
export type AgentResultOf<M extends AgentMethod> = z.infer<(typeof AGENT_METHODS)[M]['result']>

/** Whether a string names an agent method. */
export function isAgentMethod(name: string): name is AgentMethod {
  return Object.hasOwn(AGENT_METHODS, name)
}

/** Byte encodings used in agent JSON: always base64. */
export const AGENT_DATA_ENCODING: Encoding = 'base64'
