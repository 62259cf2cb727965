// The agent's side of the runner link: the listening socket and which connection is live.
//
// Model: the agent serves one Unix socket: a listening socket the driver created outside the
// sandbox's reach and handed over as an fd (or, in tests, a path). One runner connection is
// served at a time. A connection first proves it holds the sandbox's link secret
// (runner-connection.ts); only then does it replace the previous connection (a restarted
// runner reconnecting); a connection that fails, stalls or sends anything else first is
// dropped and changes nothing. Shells, processes and their output logs live on across
// connections, since they belong to the agent, not the link. `link.suspend` lets the socket go
// for a gVisor checkpoint and listens again with the next secret (link-suspend.ts). What each
// call does is the method table's (agent-methods.ts).
import { chmodSync, rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import type { CallAnswer } from '@conch/link'
import type { AgentMethod, AgentParams, AgentResultOf } from '@conch/protocol'
import { AgentError } from './agent-error.ts'
import { AgentMethods, type AgentMethodsOptions } from './agent-methods.ts'
import { EgressListener } from './egress-listener.ts'
import { awaitNextSecret, endLinkSockets, markSuspended } from './link-suspend.ts'
import type { Logger } from './logger.ts'
import { type ConnectionHost, RunnerConnection } from './runner-connection.ts'
import type { MethodContext } from './session-service.ts'

/** Everything the server needs, injected. */
export interface AgentServerOptions extends AgentMethodsOptions {
  /** Structured logger. */
  logger: Logger
  /** The sandbox's link secret; a runner connection must prove it holds it. */
  linkSecret: string
  /** The file a fresh link secret arrives in after `link.suspend`; absent, the agent cannot suspend. */
  resumeSecretFile?: string
  /** How long a new connection may take to prove the secret before it is dropped. */
  handshakeTimeoutMs?: number
}

/** Connections still proving the secret at once; more are dropped on accept. */
const MAX_HANDSHAKES = 8

/** Where the agent listens: an inherited listening socket, or a path it binds itself. */
export type ListenTarget = { fd: number } | { path: string }

/** Serves the runner link on a Unix socket. */
export class AgentServer implements ConnectionHost {
  readonly #options: AgentServerOptions
  readonly #methods: AgentMethods
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
    this.#methods = new AgentMethods(options, { egress: this.#egress, suspend: () => this.#suspend() })
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

  /**
   * Stops listening, drops every link connection (those still proving the secret too, so a
   * peer that never finishes its handshake cannot hold the close open) and ends every shell
   * and process.
   */
  async close(): Promise<void> {
    this.#connection?.destroy()
    for (const socket of this.#sockets) socket.destroy()
    this.#egress.close()
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()))
    this.#options.processes.killAll()
    this.#options.terminals.closeAll()
    await this.#options.sessions.closeAll()
    this.#options.childStdio?.dispose()
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
    await endLinkSockets([...this.#sockets])
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

  /** Dispatches one call whose params were parsed against the method's schema (agent-methods.ts). */
  dispatch<M extends AgentMethod>(
    method: M,
    params: AgentParams<M>,
    context: MethodContext,
  ): CallAnswer<AgentResultOf<M>> {
    return this.#methods.dispatch(method, params, context)
  }

  /**
   * A directory as the caller named it: `/workspace/...` and relative paths map into the
   * workspace root (and may not escape it); other absolute paths are the shell's own view.
   */
  hostDir(dir: string): string {
    return this.#methods.hostDir(dir)
  }
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
