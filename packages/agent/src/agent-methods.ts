// The agent's method table: what each call of the agent protocol does once its params parsed.
//
// `session.*` calls go to the sessions and `terminal.*` calls to the terminals, which own their
// own tables; every other method (agent info, exec, background processes, files, ports, egress,
// TCP relays, snapshots, link suspend) has its handler here, typed by method so a handler's
// params and result are the protocol's. The link itself (sockets, handshake, channels) is
// runner-connection.ts's and agent-server.ts's; this file only needs a call's `MethodContext`.
import type { CallAnswer } from '@conch/link'
import type { AgentMethod, AgentParams, AgentResultOf } from '@conch/protocol'
import { WORKSPACE_PATH } from '@conch/protocol/zod-free'
import { AgentError, toWireError } from './agent-error.ts'
import { AGENT_VERSION } from './agent-version.ts'
import type { BackgroundProcesses } from './background-processes.ts'
import type { ChildStdio } from './child-stdio.ts'
import type { Clock } from './clock.ts'
import type { EgressListener } from './egress-listener.ts'
import { listeningPorts } from './listening-ports.ts'
import { isOutput, type LogEvent } from './log-records.ts'
import { startExec } from './one-shot-exec.ts'
import type { OomCheck } from './oom-check.ts'
import type { SandboxState } from './sandbox-state.ts'
import type { MethodContext, SessionMethod, SessionService } from './session-service.ts'
import type { Spawn } from './spawner.ts'
import { dialLoopback, relaySocket } from './tcp-connector.ts'
import type { TerminalManager, TerminalMethod } from './terminal-manager.ts'
import type { WorkspaceFiles } from './workspace-files.ts'
import type { WorkspacePaths } from './workspace-paths.ts'

/** What the method handlers work on, injected. */
export interface AgentMethodsOptions {
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
  /**
   * The stdio the agent makes for children (child-stdio.ts): an exec's stdin bytes become a
   * file its command can reopen; its directory goes when the server closes.
   */
  childStdio?: Pick<ChildStdio, 'stdinFile' | 'dispose'>
  /** Time. */
  clock: Clock
  /** Tells whether an exec's exit code was the sandbox's memory limit; never, when absent. */
  oomCheck?: OomCheck
  /** How long a TCP connection the runner closed may take to deliver its last bytes (`TCP_LINGER_MS`). */
  tcpLingerMs?: number
}

/** What the table needs from the server that owns the link. */
export interface AgentMethodsLink {
  /** The sandbox's egress proxy listener (`egress.*`; `tcp.connect` refuses its port). */
  egress: EgressListener
  /** `link.suspend`: lets go of the link (agent-server.ts). */
  suspend: () => Record<string, never>
}

type Handler<M extends AgentMethod> = (
  params: AgentParams<M>,
  context: MethodContext,
) => Promise<AgentResultOf<M>>

/** Runs the agent's calls: routes `session.*` and `terminal.*`, and handles every other method. */
export class AgentMethods {
  readonly #options: AgentMethodsOptions
  readonly #link: AgentMethodsLink
  readonly #startedAt: number

  /** Creates the table; `agent.info`'s `startedAt` is now. */
  constructor(options: AgentMethodsOptions, link: AgentMethodsLink) {
    this.#options = options
    this.#link = link
    this.#startedAt = options.clock.now()
  }

  /**
   * Dispatches one call whose params were parsed against the method's schema. It returns what
   * the handler returns (its result, or a promise of it) as is; a handler that throws throws here.
   */
  dispatch<M extends AgentMethod>(
    method: M,
    params: AgentParams<M>,
    context: MethodContext,
  ): CallAnswer<AgentResultOf<M>> {
    if (isSessionMethod(method))
      return this.#options.sessions.handle(method, params as AgentParams<typeof method>, context)
    if (isTerminalMethod(method))
      return this.#options.terminals.handle(method, params as AgentParams<typeof method>, context)
    const handler = this.#handlers[
      method as Exclude<AgentMethod, SessionMethod | TerminalMethod>
    ] as unknown as Handler<M>
    return handler(params, context)
  }

  /**
   * A directory as the caller named it: `/workspace/...` and relative paths map into the
   * workspace root (and may not escape it); other absolute paths are the shell's own view.
   */
  hostDir(dir: string): string {
    if (dir.startsWith('/') && dir !== WORKSPACE_PATH && !dir.startsWith(`${WORKSPACE_PATH}/`)) return dir
    return this.#options.paths.resolve(dir)
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
    'link.suspend': async () => this.#link.suspend(),
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
      await this.#link.egress.listen(p.port)
      return {}
    },
    'egress.accept': async (p, context) => {
      const channel = context.channel(p.ch)
      const socket = await this.#link.egress.next(channel)
      if (socket) relaySocket(socket, channel, this.#options.clock, this.#options.tcpLingerMs)
      return {}
    },
    'tcp.connect': async (p, context) => {
      // The agent's own listener is not a sandbox server: relaying to it would hand the
      // sandbox's egress to whoever holds a port credential.
      if (p.port === this.#link.egress.port)
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
      o.childStdio,
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
