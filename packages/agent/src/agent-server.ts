// The agent's side of the runner link.
//
// Model: the agent serves one Unix socket: a listening socket the driver created outside the
// sandbox's reach and handed over as an fd (or, in tests, a path). One runner connection is
// served at a time. A connection first proves it holds the sandbox's link secret (see
// `@conch/protocol/link-proof`): the runner's hello carries a challenge the agent answers, and
// the runner's `auth` answers the agent's. A runner of another link version gets this agent's
// hello (so it can name the mismatch) but never gets past `auth`. Only then does it replace the previous connection (a
// restarted runner reconnecting); a connection that fails, stalls or sends anything else first
// is dropped and changes nothing. Shells, processes and their output logs live on across
// connections, since they belong to the agent, not the link.
// Every incoming frame is decoded with the length-prefixed codec and parsed against
// `HostFrame` and the called method's params schema (by the zod-free checker of the JSON
// Schema generated from them: `@conch/protocol/zod-free`, so zod is not in the agent); a bad frame gets an `error` frame (or a
// `fail` for a call with an id) and the agent keeps serving. The link is hostile input: user
// code runs next to the agent.
import { chmodSync, rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { answerCall, type CallFrame, type CallParser, LinkEndpoint } from '@conch/link'
import type {
  AGENT_METHODS,
  AgentFrame,
  AgentMethod,
  AgentParams,
  AgentResultOf,
  HostFrame,
  WireError,
} from '@conch/protocol'
import { checkLinkProof, linkNonce, linkProof } from '@conch/protocol/link-proof'
import {
  isAgentMethodName,
  LIMITS,
  LINK_VERSION,
  parseAgentParams,
  parseHostFrame,
  WORKSPACE_PATH,
} from '@conch/protocol/zod-free'
import { AgentChannel } from './agent-channel.ts'
import { AgentError, toWireError } from './agent-error.ts'
import type { BackgroundProcesses } from './background-processes.ts'
import type { Clock } from './clock.ts'
import { EgressListener } from './egress-listener.ts'
import { awaitNextSecret, markSuspended } from './link-suspend.ts'
import { listeningPorts } from './listening-ports.ts'
import type { Logger } from './logger.ts'
import { startExec } from './one-shot-exec.ts'
import type { OomCheck } from './oom-check.ts'
import { isOutput, type LogEvent } from './output-log.ts'
import type { SandboxState } from './sandbox-state.ts'
import type { MethodContext, SessionMethod, SessionService } from './session-service.ts'
import type { Spawn } from './spawner.ts'
import { dialLoopback, relaySocket } from './tcp-connector.ts'
import type { TerminalManager, TerminalMethod } from './terminal-manager.ts'
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
  /** Snapshot capture and restore of the shells and processes. */
  state: SandboxState
  /** Terminals (ptys). */
  terminals: TerminalManager
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
  /** The sandbox's link secret; a runner connection must prove it holds it. */
  linkSecret: string
  /** The file a fresh link secret arrives in after `link.suspend`; absent, the agent cannot suspend. */
  resumeSecretFile?: string
  /** How long a new connection may take to prove the secret before it is dropped. */
  handshakeTimeoutMs?: number
  /** Tells whether an exec's exit code was the sandbox's memory limit; never, when absent. */
  oomCheck?: OomCheck
  /** How long a TCP connection the runner closed may take to deliver its last bytes (`TCP_LINGER_MS`). */
  tcpLingerMs?: number
}

/** Connections still proving the secret at once; more are dropped on accept. */
const MAX_HANDSHAKES = 8

/** Where the agent listens: an inherited listening socket, or a path it binds itself. */
export type ListenTarget = { fd: number } | { path: string }

/** Serves the runner link on a Unix socket. */
export class AgentServer {
  readonly #options: AgentServerOptions
  readonly #startedAt: number
  #server: Server | undefined
  #connection: RunnerConnection | undefined
  #handshakes = 0
  /** The secret connections must prove; replaced when the link resumes after a suspend. */
  #secret: string
  #target: ListenTarget | undefined
  /** Every accepted socket still open (authenticated or not). */
  readonly #sockets = new Set<Socket>()
  #suspended = false
  readonly #egress = new EgressListener()
  /** Callbacks waiting for the first runner connection that proves the secret (`whenLinked`). */
  #linkWaiters: (() => void)[] | null = []

  /** Creates a server; call `listen` to start it. */
  constructor(options: AgentServerOptions) {
    this.#options = options
    this.#startedAt = options.clock.now()
    this.#secret = options.linkSecret
    options.sessions.setBroadcast((frame) => this.#connection?.send(frame))
  }

  /** Listens on an inherited socket fd, or on a path (replacing a stale socket file, mode 0600). */
  async listen(target: ListenTarget): Promise<void> {
    if ('path' in target) {
      try {
        rmSync(target.path, { force: true })
      } catch (error) {
        // Resuming under gVisor, the socket file of the suspended link cannot even be stat'ed
        // (the runner removed it); at start, a file in the way is an error.
        if (!this.#suspended) throw error
      }
    }
    this.#target = target
    const server = createServer((socket) => this.#accept(socket))
    this.#server = server
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      const listening = (): void => {
        server.off('error', reject)
        resolve()
      }
      if ('fd' in target) server.listen({ fd: target.fd }, listening)
      else server.listen(target.path, listening)
    })
    if ('path' in target) restrictSocket(target.path)
  }

  /**
   * Runs `callback` once, right after the first runner connection proves the link secret (at
   * once when one already has). Start-up work that the handshake does not need waits for it:
   * the agent is otherwise idle between its hello and the runner's first call, so that work
   * leaves the handshake's path without delaying the first call.
   */
  whenLinked(callback: () => void): void {
    if (this.#linkWaiters === null) callback()
    else this.#linkWaiters.push(callback)
  }

  /** Stops listening and ends every shell and process. */
  async close(): Promise<void> {
    this.#connection?.destroy()
    this.#egress.close()
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()))
    this.#options.processes.killAll()
    this.#options.terminals.closeAll()
    await this.#options.sessions.closeAll()
  }

  #accept(socket: Socket): void {
    if (this.#handshakes >= MAX_HANDSHAKES) {
      socket.destroy()
      return
    }
    this.#handshakes += 1
    this.#sockets.add(socket)
    const connection = new RunnerConnection(socket, this, this.#secret)
    const timer = setTimeout(() => {
      this.#options.logger.warn({}, 'a connection did not prove the link secret in time; dropped')
      connection.destroy()
    }, this.#options.handshakeTimeoutMs ?? 10_000)
    let settled = false
    const settle = (): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      this.#handshakes -= 1
    }
    connection.onAuthenticated(() => {
      settle()
      if (this.#connection) {
        this.#options.logger.info({}, 'a new runner connection replaces the previous one')
        this.#connection.destroy()
      }
      this.#connection = connection
      const waiters = this.#linkWaiters
      this.#linkWaiters = null
      // After this turn: the handler that proved the secret finishes first.
      if (waiters !== null && waiters.length > 0)
        setImmediate(() => {
          for (const w of waiters) w()
        })
    })
    socket.on('close', () => {
      this.#sockets.delete(socket)
      settle()
      if (this.#connection === connection) this.#connection = undefined
    })
  }

  /**
   * `link.suspend`: stops listening now, and once the answer is out drops every link socket,
   * marks the link dir and waits for the next secret (link-suspend.ts).
   */
  #suspend(): Record<string, never> {
    const secretFile = this.#options.resumeSecretFile
    const target = this.#target
    if (secretFile === undefined || target === undefined || !('path' in target)) {
      throw new AgentError(
        'BAD_REQUEST',
        'this agent cannot suspend its link (it was not started with --socket and --secretFile); live snapshots need the gvisor driver',
      )
    }
    if (this.#suspended) throw new AgentError('BAD_REQUEST', 'the link is already suspended')
    this.#suspended = true
    this.#server?.close()
    this.#server = undefined
    // The socket file stays: gVisor refuses to stat a host socket's file; the runner removes it.
    setImmediate(() => void this.#awaitResume(secretFile, target))
    return {}
  }

  async #awaitResume(secretFile: string, target: ListenTarget): Promise<void> {
    const sockets = [...this.#sockets]
    const closed = sockets.map(
      (s) => new Promise((resolve) => (s.destroyed ? resolve(null) : s.once('close', resolve))),
    )
    for (const socket of sockets) socket.end()
    const force = setTimeout(() => {
      for (const socket of sockets) socket.destroy()
    }, 2_000)
    await Promise.all(closed)
    clearTimeout(force)
    markSuspended(secretFile)
    this.#options.logger.info({}, 'link suspended; waiting for a new secret')
    this.#secret = await awaitNextSecret(secretFile)
    await this.listen(target)
    this.#suspended = false
    this.#options.logger.info({}, 'link resumed')
  }

  /** Logs a failed handshake; called by a connection before it drops itself. */
  rejected(reason: string): void {
    this.#options.logger.warn({ reason }, 'refused a connection that did not prove the link secret')
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
    if (isTerminalMethod(method))
      return this.#options.terminals.handle(method, params as AgentParams<typeof method>, context)
    const handler = this.#handlers[
      method as Exclude<AgentMethod, SessionMethod | TerminalMethod>
    ] as unknown as Handler<M>
    return handler(params, context)
  }

  readonly #handlers: { [M in Exclude<AgentMethod, SessionMethod | TerminalMethod>]: Handler<M> } = {
    'agent.info': async (_p, context) => ({
      pid: process.pid,
      agentVersion: AGENT_VERSION,
      startedAt: this.#startedAt,
      rssBytes: process.memoryUsage.rss(),
      heapUsedBytes: heapUsedAfterGc(),
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
    'link.suspend': async () => this.#suspend(),
    'snapshot.capture': () => this.#options.state.capture(),
    'snapshot.restore': async (p) => ({
      sessions: await this.#options.state.restore(p.state, p.restartProcesses),
    }),
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
    'ports.list': async () => ({ ports: await listeningPorts() }),
    'egress.listen': async (p) => {
      await this.#egress.listen(p.port)
      return {}
    },
    'egress.accept': async (p, context) => {
      const channel = context.channel(p.ch)
      const socket = await this.#egress.next(channel)
      if (socket) relaySocket(socket, channel, this.#options.clock, this.#options.tcpLingerMs)
      return {}
    },
    'tcp.connect': async (p, context) => {
      // The agent's own listener is not a sandbox server: relaying to it would hand the
      // sandbox's egress to whoever holds a port credential.
      if (p.port === this.#egress.port)
        throw new AgentError(
          'FORBIDDEN',
          `port ${p.port} is the sandbox's egress proxy, which only programs inside the sandbox may use`,
        )
      // The channel exists before the dial, so nothing the runner sends on it is dropped.
      const channel = context.channel(p.ch)
      try {
        relaySocket(await dialLoopback(p.port), channel, this.#options.clock, this.#options.tcpLingerMs)
      } catch (error) {
        channel.close()
        throw error
      }
      return {}
    },
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
                  const ok = channel.output(stream, null, offset, data)
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
        channel.end({
          type: 'end',
          exitCode: r.exitCode,
          timedOut: r.timedOut,
          durationMs: r.durationMs,
          ...(this.#oomKilled(r.exitCode) ? { oomKilled: true } : {}),
        })
      })
      return {}
    }
    const r = await handle.done
    const oomKilled = this.#oomKilled(r.exitCode)
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
      ...(oomKilled ? { oomKilled } : {}),
    }
  }

  /** Whether the sandbox's memory limit killed an exec that exited with `exitCode`. */
  #oomKilled(exitCode: number): boolean {
    return this.#options.oomCheck?.(exitCode) ?? false
  }

  #streamProcess(p: AgentParams<'process.stream'>, context: MethodContext): Record<string, never> {
    const channel = context.channel(p.ch)
    const forward = (event: LogEvent): boolean => {
      if (isOutput(event))
        return channel.sendPayload({ type: event.type, id: null, offset: event.offset }, event.data)
      if (event.type === 'shell_exit')
        channel.end({ type: 'end', exitCode: event.code, timedOut: false, durationMs: event.durationMs })
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
      if (!channel.data(offset, bytes)) stream.pause()
      offset += bytes.length
    })
    stream.on('end', () => channel.end({ type: 'end', exitCode: null, timedOut: false, durationMs: 0 }))
    stream.on('error', (err) => channel.end({ type: 'error', error: toWireError(err) }))
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

/**
 * The V8 heap in use. Only an agent started with `--expose-gc` (a memory test) collects
 * garbage first, so the figure is what is live; drivers never expose `gc`.
 */
function heapUsedAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc
  if (typeof gc === 'function') gc()
  return process.memoryUsage().heapUsed
}

function isSessionMethod(method: AgentMethod): method is SessionMethod {
  return method.startsWith('session.')
}

function isTerminalMethod(method: AgentMethod): method is TerminalMethod {
  return method.startsWith('terminal.')
}

/** One runner connection: the handshake, calls and channels, over a link endpoint. */
class RunnerConnection {
  readonly #endpoint: LinkEndpoint<AgentFrame, HostFrame>
  readonly #server: AgentServer
  readonly #channels = new Map<number, AgentChannel>()
  readonly #context: MethodContext
  readonly #secret: string
  /** The challenge this agent sent in its hello; null until the runner's hello arrived. */
  #nonce: string | null = null
  /** The runner's link version when it is not this agent's; such a runner is never authenticated. */
  #foreignLink: number | null = null
  #authenticated = false
  #onAuthenticated: () => void = () => {}
  /** Runs with a stdin pipe asked for and not started yet, whose start is not lazy. */
  readonly #pipedRuns = new Set<string>()

  constructor(socket: Socket, server: AgentServer, secret: string) {
    this.#server = server
    this.#secret = secret
    this.#context = { channel: (ch) => this.#channel(ch) }
    this.#endpoint = new LinkEndpoint<AgentFrame, HostFrame>(socket, {
      parse: parseHostFrame,
      maxFrameBytes: LIMITS.maxAgentFrameBytes,
      onFrame: (frame, payload) => this.#receive(frame, payload),
      onBadFrame: (error, header) => this.#badFrame(error, header),
      onDrain: () => {
        for (const channel of this.#channels.values()) channel.drained()
      },
      onClose: (reason) => {
        const error = { code: 'CONNECTION_LOST' as const, message: `the runner link closed: ${reason}` }
        for (const channel of [...this.#channels.values()]) channel.lost(error)
        this.#channels.clear()
      },
    })
  }

  /**
   * Sends one frame; false when the socket's buffer is full. A run's start is news nobody
   * waits for, so it goes lazily: a short run's start leaves with its exit, in one write. The
   * start of a run with a stdin pipe goes at once: its client holds the input until it sees it.
   */
  send(frame: AgentFrame, payload?: Uint8Array): boolean {
    let lazy = false
    if (frame.type === 'shell_start') lazy = !this.#pipedRuns.delete(frame.id)
    else if (frame.type === 'shell_exit') this.#pipedRuns.delete(frame.id)
    return this.#endpoint.send(frame, payload, lazy)
  }

  /** Drops the connection. */
  destroy(): void {
    this.#endpoint.close()
  }

  /** Called once the peer proved the link secret. */
  onAuthenticated(handler: () => void): void {
    this.#onAuthenticated = handler
  }

  /** Handles a frame before the peer proved the secret: only hello, then auth. */
  #handshake(frame: HostFrame): void {
    if (frame.type === 'hello' && this.#nonce === null) {
      this.#nonce = linkNonce()
      if (frame.linkVersion !== LINK_VERSION) this.#foreignLink = frame.linkVersion
      this.send({
        type: 'hello',
        linkVersion: LINK_VERSION,
        agentVersion: AGENT_VERSION,
        pid: process.pid,
        startedAt: Math.floor(performance.timeOrigin),
        nonce: this.#nonce,
        proof: linkProof(this.#secret, 'agent', frame.nonce),
      })
      return
    }
    if (frame.type === 'auth' && this.#foreignLink !== null) {
      this.#server.rejected(
        `the runner speaks link protocol ${this.#foreignLink}; this agent speaks ${LINK_VERSION}`,
      )
    } else if (frame.type === 'auth' && this.#nonce !== null) {
      if (checkLinkProof(this.#secret, 'runner', this.#nonce, frame.proof)) {
        this.#authenticated = true
        this.#endpoint.live()
        this.#onAuthenticated()
        return
      }
      this.#server.rejected('wrong proof')
    } else {
      this.#server.rejected(`"${frame.type}" before the handshake finished`)
    }
    this.#endpoint.close('handshake failed')
  }

  #channel(ch: number): AgentChannel {
    let channel = this.#channels.get(ch)
    if (!channel) {
      const opened: AgentChannel = new AgentChannel(
        ch,
        (h, p) => this.send(h, p),
        () => {
          if (this.#channels.get(ch) === opened) this.#channels.delete(ch)
        },
      )
      channel = opened
      this.#channels.set(ch, channel)
    }
    return channel
  }

  /** An undecodable or invalid frame: fatal before the handshake, answered after it. */
  #badFrame(error: WireError, header: unknown): void {
    if (!this.#authenticated) {
      this.#server.rejected(
        header === undefined
          ? 'an undecodable frame before the handshake finished'
          : `an invalid frame before the handshake finished: ${error.message}`,
      )
      this.#endpoint.close('bad frame before the handshake')
      return
    }
    const id = callId(header)
    this.send(id === undefined ? { type: 'error', error } : { type: 'fail', id, error })
  }

  #receive(frame: HostFrame, payload: Uint8Array): void {
    if (!this.#authenticated) {
      this.#handshake(frame)
      return
    }
    switch (frame.type) {
      case 'hello':
      case 'auth':
        this.send({
          type: 'error',
          error: { code: 'BAD_REQUEST', message: `"${frame.type}" is only valid once, at the start` },
        })
        break
      case 'call':
        void this.#call(frame)
        break
      case 'credit':
      case 'close':
      case 'data':
      case 'end':
        this.#channels.get(frame.ch)?.deliver(frame, payload)
        break
      case 'ping':
      case 'pong':
        // The endpoint answers heartbeats once the link is live.
        break
    }
  }

  #call(frame: CallFrame): Promise<void> {
    // A streamed run's `{}` only says it was queued; nobody waits for it (a failure still
    // leaves at once).
    const run = frame.method === 'session.run' ? streamedRun(frame.params) : null
    if (run?.piped) this.#pipedRuns.add(run.id)
    return answerCall(
      CALLS,
      frame,
      (method, params) => this.#server.dispatch(method, params, this.#context),
      (answer) => {
        if (run?.piped && answer.type === 'fail') this.#pipedRuns.delete(run.id)
        this.#endpoint.send(answer, undefined, run !== null && answer.type === 'result')
      },
      toWireError,
    )
  }
}

/** The agent's calls, checked by the zod-free parsers of `AGENT_METHODS`' params. */
const CALLS: CallParser<typeof AGENT_METHODS> = { has: isAgentMethodName, params: parseAgentParams }

/** A `session.run`'s run id and stdin pipe when its params ask for a streamed run (`buffer: false`). */
function streamedRun(params: unknown): { id: string; piped: boolean } | null {
  if (typeof params !== 'object' || params === null) return null
  const { buffer, id, stdinPipe } = params as { buffer?: unknown; id?: unknown; stdinPipe?: unknown }
  if (buffer !== false || typeof id !== 'string') return null
  return { id, piped: stdinPipe === true }
}

function callId(header: unknown): number | undefined {
  if (typeof header !== 'object' || header === null || !('id' in header)) return undefined
  const id = header.id
  return typeof id === 'number' && Number.isInteger(id) && id >= 0 ? id : undefined
}

/**
 * Makes a socket path owner-only. A socket on a host path made through gVisor's host-uds
 * refuses chmod (EPERM); there the driver's root-only directory is what guards it.
 */
function restrictSocket(path: string): void {
  try {
    chmodSync(path, 0o600)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error
  }
}
