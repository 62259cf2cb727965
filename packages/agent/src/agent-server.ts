// The agent's side of the runner link.
//
// Model: the agent listens on one Unix socket. One runner connection is served at a time; a
// new connection replaces the previous one (a restarted runner reconnecting), and shells,
// processes and their output logs live on, since they belong to the agent, not the link.
// Every incoming frame is decoded with the length-prefixed codec and parsed against
// `HostFrame` and the called method's params schema; a bad frame gets an `error` frame (or a
// `fail` for a call with an id) and the agent keeps serving. The link is hostile input: user
// code runs next to the agent.
import { chmodSync, rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import {
  AGENT_METHODS,
  type AgentMethod,
  type AgentParams,
  type AgentResultOf,
  encodeFrame,
  FrameDecoder,
  HOST_FRAME_TYPES,
  HostFrame,
  isAgentMethod,
  LIMITS,
  PROTOCOL_VERSION,
  parseFrame,
  WORKSPACE_PATH,
} from '@conch/protocol'
import { AgentChannel } from './agent-channel.ts'
import { AgentError, toWireError } from './agent-error.ts'
import type { BackgroundProcesses } from './background-processes.ts'
import type { Clock } from './clock.ts'
import type { Logger } from './logger.ts'
import { startExec } from './one-shot-exec.ts'
import type { MethodContext, SessionMethod, SessionService } from './session-service.ts'
import type { Spawn } from './spawner.ts'
import type { WorkspaceFiles } from './workspace-files.ts'
import type { WorkspacePaths } from './workspace-paths.ts'

/** Agent package version, reported in `hello`. */
export const AGENT_VERSION = '0.1.0'

/** Everything the server needs, injected. */
export interface AgentServerOptions {
  /** The workspace root's path mapping. */
  paths: WorkspacePaths
  /** File operations in the workspace. */
  files: WorkspaceFiles
  /** Background processes. */
  processes: BackgroundProcesses
  /** Shell sessions. */
  sessions: SessionService
  /** The sandbox's base environment (for exec and processes). */
  baseEnv: Readonly<Record<string, string>>
  /** Builds a process's environment from the base, `cleanEnv` and extras. */
  buildEnv: (base: Readonly<Record<string, string>>, cleanEnv: boolean, extra?: Readonly<Record<string, string>>) => Record<string, string>
  /** Process creation. */
  spawn: Spawn
  /** Time. */
  clock: Clock
  /** Structured logger. */
  logger: Logger
}

/** Serves the runner link on a Unix socket. */
export class AgentServer {
  readonly #options: AgentServerOptions
  readonly #startedAt: number
  #server: Server | undefined
  #connection: RunnerConnection | undefined

  /** Creates a server; call `listen` to start it. */
  constructor(options: AgentServerOptions) {
    this.#options = options
    this.#startedAt = options.clock.now()
    options.sessions.setBroadcast((frame) => this.#connection?.send(frame))
  }

  /** Listens on `socketPath` (replacing a stale socket file), mode 0600. */
  async listen(socketPath: string): Promise<void> {
    rmSync(socketPath, { force: true })
    const server = createServer((socket) => this.#accept(socket))
    this.#server = server
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(socketPath, () => {
        server.off('error', reject)
        resolve()
      })
    })
    chmodSync(socketPath, 0o600)
  }

  /** Stops listening and ends every shell and process. */
  async close(): Promise<void> {
    this.#connection?.destroy()
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()))
    this.#options.processes.killAll()
    await this.#options.sessions.closeAll()
  }

  #accept(socket: Socket): void {
    if (this.#connection) {
      this.#options.logger.info({}, 'a new runner connection replaces the previous one')
      this.#connection.destroy()
    }
    const connection = new RunnerConnection(socket, this)
    this.#connection = connection
    socket.on('close', () => {
      if (this.#connection === connection) this.#connection = undefined
    })
  }

  /** Dispatches one parsed call. */
  async dispatch<M extends AgentMethod>(method: M, params: AgentParams<M>, context: MethodContext): Promise<AgentResultOf<M>> {
    return (await this.#dispatch(method, params as never, context)) as AgentResultOf<M>
  }

  async #dispatch(method: AgentMethod, params: never, context: MethodContext): Promise<unknown> {
    const o = this.#options
    if (method.startsWith('session.')) return o.sessions.handle(method as SessionMethod, params, context)
    switch (method) {
      case 'agent.info':
        return {
          pid: process.pid,
          agentVersion: AGENT_VERSION,
          startedAt: this.#startedAt,
          rssBytes: process.memoryUsage.rss(),
          sessions: (await o.sessions.handle('session.list', {}, context)).sessions.length,
          workdir: o.paths.root,
        }
      case 'exec':
        return this.#exec(params as AgentParams<'exec'>, context)
      case 'process.start': {
        const p = params as AgentParams<'process.start'>
        const state = p.sessionId ? await o.sessions.shellState(p.sessionId) : undefined
        const cwd = p.cwd ? this.hostDir(p.cwd) : (state?.cwd ?? o.paths.root)
        const env = { ...o.buildEnv(state ? state.env : o.baseEnv, false), ...p.env }
        return o.processes.start({ command: p.command, cwd, env })
      }
      case 'process.list':
        return { processes: o.processes.list() }
      case 'process.get':
        return o.processes.get((params as AgentParams<'process.get'>).id)
      case 'process.output': {
        const p = params as AgentParams<'process.output'>
        const out = o.processes.output(p.id, p.since)
        return { stdout: out.stdout.toString('base64'), stderr: out.stderr.toString('base64'), nextOffset: out.nextOffset, status: out.status }
      }
      case 'process.stream':
        return this.#streamProcess(params as AgentParams<'process.stream'>, context)
      case 'process.kill': {
        const p = params as AgentParams<'process.kill'>
        return o.processes.kill(p.id, p.signal)
      }
      case 'process.wait': {
        const p = params as AgentParams<'process.wait'>
        return o.processes.wait(p.id, p.timeoutMs)
      }
      case 'file.read':
        return this.#readFile(params as AgentParams<'file.read'>, context)
      case 'file.write': {
        const p = params as AgentParams<'file.write'>
        const channel = context.channel(p.ch)
        try {
          return await o.files.write(p.path, channel.uploads(), p.mode)
        } finally {
          channel.close()
        }
      }
      case 'file.list':
        return { entries: await o.files.list((params as AgentParams<'file.list'>).path) }
      case 'file.stat':
        return o.files.stat((params as AgentParams<'file.stat'>).path)
      case 'file.mkdir': {
        const p = params as AgentParams<'file.mkdir'>
        return o.files.mkdir(p.path, p.recursive)
      }
      case 'file.remove': {
        const p = params as AgentParams<'file.remove'>
        await o.files.remove(p.path, p.recursive)
        return {}
      }
      case 'file.rename': {
        const p = params as AgentParams<'file.rename'>
        return o.files.rename(p.from, p.to)
      }
      default:
        throw new AgentError('BAD_REQUEST', `method "${method}" is not served by this agent`)
    }
  }

  /**
   * A directory as the caller named it: `/workspace/...` and relative paths map into the
   * workspace root (and may not escape it); other absolute paths are the shell's own view.
   */
  hostDir(dir: string): string {
    if (dir.startsWith('/') && dir !== WORKSPACE_PATH && !dir.startsWith(`${WORKSPACE_PATH}/`)) return dir
    return this.#options.paths.resolve(dir)
  }

  async #exec(p: AgentParams<'exec'>, context: MethodContext): Promise<unknown> {
    const o = this.#options
    const channel = p.ch === undefined ? undefined : context.channel(p.ch)
    const handle = startExec(
      {
        command: p.command,
        cwd: p.cwd ? this.hostDir(p.cwd) : o.paths.root,
        env: o.buildEnv(o.baseEnv, false, p.env),
        ...(p.stdin === undefined ? {} : { stdin: Buffer.from(p.stdin, 'base64') }),
        timeoutMs: p.timeoutMs,
        ...(p.outputCapBytes === undefined ? {} : { outputCapBytes: p.outputCapBytes }),
        ...(channel
          ? {
              onData: (() => {
                let offset = 0
                return (stream: 'stdout' | 'stderr', data: Buffer) => {
                  const ok = channel.data(stream, null, offset, data)
                  offset += data.length
                  return ok
                }
              })(),
            }
          : {}),
      },
      o.spawn,
      o.clock,
    )
    if (channel) {
      channel.onResume(() => handle.resume())
      channel.onClose(() => {
        if (!channel.done) return
      })
      void handle.done.then((r) => channel.end({ t: 'end', exitCode: r.exitCode, timedOut: r.timedOut, durationMs: r.durationMs }))
      return {}
    }
    const r = await handle.done
    return {
      stdout: r.stdout.bytes().toString('base64'),
      stderr: r.stderr.bytes().toString('base64'),
      encoding: 'base64',
      exitCode: r.exitCode,
      timedOut: r.timedOut,
      truncated: r.stdout.truncated || r.stderr.truncated,
      stdoutBytes: r.stdout.totalBytes,
      stderrBytes: r.stderr.totalBytes,
      durationMs: r.durationMs,
    }
  }

  #streamProcess(p: AgentParams<'process.stream'>, context: MethodContext): unknown {
    const channel = context.channel(p.ch)
    const { replay, subscription, info } = this.#options.processes.subscribe(p.id, p.since, (event) => {
      if (event.type === 'data') return channel.data(event.stream, null, event.offset, event.data)
      if (event.type === 'run-exit') {
        channel.end({ t: 'end', exitCode: event.exitCode, timedOut: false, durationMs: event.durationMs })
        subscription.close()
      }
      return true
    })
    channel.onResume(() => subscription.resume())
    channel.onClose(() => subscription.close())
    queueMicrotask(() => {
      let room = true
      for (const event of replay) {
        if (event.type === 'data') room = channel.data(event.stream, null, event.offset, event.data) && room
        else if (event.type === 'run-exit') {
          channel.end({ t: 'end', exitCode: event.exitCode, timedOut: false, durationMs: event.durationMs })
          subscription.close()
        }
      }
      if (!room) void room
    })
    return info.status === 'running' ? {} : {}
  }

  async #readFile(p: AgentParams<'file.read'>, context: MethodContext): Promise<unknown> {
    const channel = context.channel(p.ch)
    const { info, stream } = await this.#options.files.read(p.path)
    let offset = 0
    stream.on('data', (chunk) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
      if (!channel.data('stdout', null, offset, bytes)) stream.pause()
      offset += bytes.length
    })
    stream.on('end', () => channel.end({ t: 'end', exitCode: null, timedOut: false, durationMs: 0 }))
    stream.on('error', (err) => channel.end({ t: 'error', error: toWireError(err) }))
    channel.onResume(() => stream.resume())
    channel.onClose(() => stream.destroy())
    stream.pause()
    queueMicrotask(() => stream.resume())
    return info
  }
}

/** One runner connection: decoding, parsing, channels. */
class RunnerConnection {
  readonly #socket: Socket
  readonly #server: AgentServer
  readonly #decoder = new FrameDecoder(LIMITS.maxAgentFrameBytes)
  readonly #channels = new Map<number, AgentChannel>()
  readonly #context: MethodContext

  constructor(socket: Socket, server: AgentServer) {
    this.#socket = socket
    this.#server = server
    this.#context = { channel: (ch) => this.#channel(ch) }
    socket.on('data', (chunk) => this.#receive(chunk))
    socket.on('drain', () => {
      for (const channel of this.#channels.values()) channel.drained()
    })
    socket.on('error', () => {})
    socket.on('close', () => {
      for (const channel of this.#channels.values()) channel.close()
      this.#channels.clear()
    })
  }

  /** Sends one frame; false when the socket's buffer is full. */
  send(header: Record<string, unknown>, payload?: Uint8Array): boolean {
    if (this.#socket.destroyed) return false
    return this.#socket.write(encodeFrame(header, payload))
  }

  /** Drops the connection. */
  destroy(): void {
    this.#socket.destroy()
  }

  #channel(ch: number): AgentChannel {
    let channel = this.#channels.get(ch)
    if (!channel) {
      channel = new AgentChannel(ch, (h, p) => this.send(h, p), LIMITS.channelWindowBytes)
      this.#channels.set(ch, channel)
      const opened = channel
      channel.onClose(() => {
        if (this.#channels.get(ch) === opened) this.#channels.delete(ch)
      })
    }
    return channel
  }

  #receive(chunk: Buffer): void {
    for (const result of this.#decoder.push(chunk)) {
      if (!result.ok) {
        this.send({ t: 'error', error: result.error })
        continue
      }
      const parsed = parseFrame(HostFrame, result.frame.header, 't', HOST_FRAME_TYPES)
      if (!parsed.ok) {
        const id = callId(result.frame.header)
        this.send(id === undefined ? { t: 'error', error: parsed.error } : { t: 'fail', id, error: parsed.error })
        continue
      }
      const frame = parsed.value
      switch (frame.t) {
        case 'hello':
          this.send({ t: 'hello', protocolVersion: PROTOCOL_VERSION, agentVersion: AGENT_VERSION, pid: process.pid, startedAt: Math.floor(performance.timeOrigin) })
          break
        case 'call':
          void this.#call(frame.id, frame.method, frame.params)
          break
        case 'credit':
          this.#channels.get(frame.ch)?.grant(frame.bytes)
          break
        case 'close':
          this.#channels.get(frame.ch)?.close()
          break
        case 'data':
          this.#channels.get(frame.ch)?.pushUpload(result.frame.payload)
          break
        case 'end':
          this.#channels.get(frame.ch)?.endUpload()
          break
        case 'ping':
          this.send({ t: 'pong', n: frame.n })
          break
        case 'pong':
          break
      }
    }
  }

  async #call(id: number, method: string, rawParams: unknown): Promise<void> {
    if (!isAgentMethod(method)) {
      this.send({ t: 'fail', id, error: { code: 'BAD_REQUEST', message: `unknown method "${method.slice(0, 64)}"` } })
      return
    }
    const parsed = AGENT_METHODS[method].params.safeParse(rawParams ?? {})
    if (!parsed.success) {
      const fields = parsed.error.issues
        .slice(0, 5)
        .map((i) => `${i.path.join('.') || '(params)'}: ${i.message}`)
        .join('; ')
      this.send({ t: 'fail', id, error: { code: 'BAD_REQUEST', message: `invalid params for ${method}: ${fields}` } })
      return
    }
    try {
      const result = await this.#server.dispatch(method, parsed.data as never, this.#context)
      this.send({ t: 'result', id, result })
    } catch (err) {
      this.send({ t: 'fail', id, error: toWireError(err) })
    }
  }
}

function callId(header: unknown): number | undefined {
  if (typeof header !== 'object' || header === null || !('id' in header)) return undefined
  const id = header.id
  return typeof id === 'number' && Number.isInteger(id) && id >= 0 ? id : undefined
}
