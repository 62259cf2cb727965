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
import { toWireError } from './agent-error.ts'
import type { BackgroundProcesses } from './background-processes.ts'
import type { Clock } from './clock.ts'
import { writeFrame } from './frame-writer.ts'
import type { Logger } from './logger.ts'
import { startExec } from './one-shot-exec.ts'
import type { LogEvent } from './output-log.ts'
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
  buildEnv: (
    base: Readonly<Record<string, string>>,
    cleanEnv: boolean,
    extra?: Readonly<Record<string, string>>,
  ) => Record<string, string>
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

  /**
   * Dispatches one call whose params were parsed against the method's schema. It returns the
   * handler's promise as is; a handler that throws before returning one throws here.
   */
  dispatch<M extends AgentMethod>(
    method: M,
    params: AgentParams<M>,
    context: MethodContext,
  ): Promise<AgentResultOf<M>> {
    if (isSessionMethod(method))
      return this.#options.sessions.handle(method, params as AgentParams<typeof method>, context)
    const handler = this.#handlers[method as Exclude<AgentMethod, SessionMethod>] as unknown as Handler<M>
    return handler(params, context)
  }

  readonly #handlers: { [M in Exclude<AgentMethod, SessionMethod>]: Handler<M> } = {
    'agent.info': async (_p, context) => ({
      pid: process.pid,
      agentVersion: AGENT_VERSION,
      startedAt: this.#startedAt,
      rssBytes: process.memoryUsage.rss(),
      sessions: (await this.#options.sessions.handle('session.list', {}, context)).sessions.length,
      workdir: this.#options.paths.root,
    }),
    exec: (p, context) => this.#exec(p, context),
    'process.start': async (p) => {
      const o = this.#options
      const state = p.sessionId ? await o.sessions.shellState(p.sessionId) : undefined
      const cwd = p.cwd ? this.hostDir(p.cwd) : (state?.cwd ?? o.paths.root)
      const env = { ...(state ? state.env : o.buildEnv(o.baseEnv, false)), ...p.env }
      return o.processes.start({ command: p.command, cwd, env })
    },
    'process.list': async () => ({ processes: this.#options.processes.list() }),
    'process.get': async (p) => this.#options.processes.get(p.id),
    'process.output': async (p) => {
      const out = this.#options.processes.output(p.id, p.since)
      return {
        stdout: out.stdout.toString('base64'),
        stderr: out.stderr.toString('base64'),
        nextOffset: out.nextOffset,
        status: out.status,
      }
    },
    'process.stream': async (p, context) => this.#streamProcess(p, context),
    'process.kill': async (p) => this.#options.processes.kill(p.id, p.signal),
    'process.wait': (p) => this.#options.processes.wait(p.id, p.timeoutMs),
    'file.read': (p, context) => this.#readFile(p, context),
    'file.write': async (p, context) => {
      const channel = context.channel(p.ch)
      try {
        return await this.#options.files.write(p.path, channel.uploads(), p.mode)
      } finally {
        channel.close()
      }
    },
    'file.list': async (p) => ({ entries: await this.#options.files.list(p.path) }),
    'file.stat': (p) => this.#options.files.stat(p.path),
    'file.mkdir': (p) => this.#options.files.mkdir(p.path, p.recursive),
    'file.remove': async (p) => {
      await this.#options.files.remove(p.path, p.recursive)
      return {}
    },
    'file.rename': (p) => this.#options.files.rename(p.from, p.to),
  }

  /**
   * A directory as the caller named it: `/workspace/...` and relative paths map into the
   * workspace root (and may not escape it); other absolute paths are the shell's own view.
   */
  hostDir(dir: string): string {
    if (dir.startsWith('/') && dir !== WORKSPACE_PATH && !dir.startsWith(`${WORKSPACE_PATH}/`)) return dir
    return this.#options.paths.resolve(dir)
  }

  async #exec(p: AgentParams<'exec'>, context: MethodContext): Promise<AgentResultOf<'exec'>> {
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
      let finished = false
      channel.onResume(() => handle.resume())
      // The runner closing the channel means nobody wants the output any more: stop the command.
      channel.onClose(() => {
        if (!finished) handle.cancel()
      })
      void handle.done.then((r) => {
        finished = true
        channel.end({ t: 'end', exitCode: r.exitCode, timedOut: r.timedOut, durationMs: r.durationMs })
      })
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

  #streamProcess(p: AgentParams<'process.stream'>, context: MethodContext): Record<string, never> {
    const channel = context.channel(p.ch)
    const forward = (event: LogEvent): boolean => {
      if (event.type === 'data') return channel.data(event.stream, null, event.offset, event.data)
      if (event.type === 'run-exit')
        channel.end({ t: 'end', exitCode: event.exitCode, timedOut: false, durationMs: event.durationMs })
      return true
    }
    const { replay, subscription } = this.#options.processes.subscribe(p.id, p.since, forward)
    channel.onResume(() => subscription.resume())
    channel.onClose(() => subscription.close())
    // Replay is sent before any live event can arrive: both happen in this tick.
    for (const event of replay) forward(event)
    return {}
  }

  async #readFile(p: AgentParams<'file.read'>, context: MethodContext): Promise<AgentResultOf<'file.read'>> {
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

type Handler<M extends AgentMethod> = (
  params: AgentParams<M>,
  context: MethodContext,
) => Promise<AgentResultOf<M>>

function isSessionMethod(method: AgentMethod): method is SessionMethod {
  return method.startsWith('session.')
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
    return writeFrame(this.#socket, header, payload)
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
        this.send(
          id === undefined ? { t: 'error', error: parsed.error } : { t: 'fail', id, error: parsed.error },
        )
        continue
      }
      const frame = parsed.value
      switch (frame.t) {
        case 'hello':
          this.send({
            t: 'hello',
            protocolVersion: PROTOCOL_VERSION,
            agentVersion: AGENT_VERSION,
            pid: process.pid,
            startedAt: Math.floor(performance.timeOrigin),
          })
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
      this.send({
        t: 'fail',
        id,
        error: { code: 'BAD_REQUEST', message: `unknown method "${method.slice(0, 64)}"` },
      })
      return
    }
    const parsed = AGENT_METHODS[method].params.safeParse(rawParams ?? {})
    if (!parsed.success) {
      const fields = parsed.error.issues
        .slice(0, 5)
        .map((i) => `${i.path.join('.') || '(params)'}: ${i.message}`)
        .join('; ')
      this.send({
        t: 'fail',
        id,
        error: { code: 'BAD_REQUEST', message: `invalid params for ${method}: ${fields}` },
      })
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
