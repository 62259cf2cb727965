// The local driver: the agent is a plain child process on the host, detached from the runner,
// with its workspace in a folder under the runner's state dir. There is NO isolation: sandbox
// code runs as the runner's user, sees the host's files and network, and limits are recorded but
// not enforced. It exists for development; the namespace driver is the real sandbox.
import { spawn } from 'node:child_process'
import { closeSync, mkdirSync, openSync, rmSync } from 'node:fs'
import { userInfo } from 'node:os'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import type { SandboxLimits } from '@conch/protocol'
import { AGENT_NODE_FLAGS, agentCommand, compileCacheFlag } from '@conch/protocol'
import { z } from 'zod'
import { RunnerError } from '../runner-error.ts'
import { releaseWorkspaceOverlay } from '../snapshots/workspace-overlay.ts'
import { locateAgentBundle } from './agent-bundle.ts'
import { bindAgentSocket, sendLinkSecret } from './agent-endpoint.ts'
import { connectToAgent } from './agent-socket.ts'
import { descendantsOf } from './proc-stat.ts'
import { DEFAULT_SANDBOX_PATH, sandboxBaseEnv } from './sandbox-base-env.ts'
import type { DriverSandbox, Liveness, SandboxDriver, SandboxSpec } from './sandbox-driver.ts'

/** The local driver's handle state. */
const LocalState = z.object({
  /** Folder holding the workspace and the agent log. */
  dir: z.string(),
  /** The directory (0700, the runner's) holding the agent's socket. */
  socketDir: z.string(),
  /** The sandbox's link secret. */
  linkSecret: z.string(),
  /** The agent's pid, once started. */
  pid: z.number().int().positive().optional(),
})
type LocalState = z.infer<typeof LocalState>

/**
 * The agent's temp root: a folder of the sandbox's, so the command files and pipes of an agent
 * killed without its cleanup (the runner's destroy) go with the sandbox's folder instead of
 * staying in the host's shared `/dev/shm`. On disk, a run's command file costs a little more.
 */
function localTempRoot(dir: string): string {
  const root = join(dir, 'tmp')
  mkdirSync(root, { recursive: true, mode: 0o700 })
  return root
}

/** Options of the local driver. */
export interface LocalDriverOptions {
  /** The runner's state dir; sandboxes live in `<stateDir>/sandboxes/<id>`. */
  stateDir: string
  /** The agent's source main file to bundle; defaults to the shipped bundle (see agent-bundle.ts). */
  agentEntry?: string
  /** PATH given to agents; defaults to the runner's PATH. */
  path?: string
  /** Node binary that runs the agent; defaults to the runner's own. */
  nodePath?: string
}

/** A driver that runs each agent as a detached child process with no isolation. */
export class LocalDriver implements SandboxDriver {
  /** Driver name. */
  readonly name = 'local'
  /** No isolation at all. */
  readonly isolation = 'none' as const
  /** What users are told on every sandbox. */
  readonly description =
    'local driver: a plain child process on the host with NO isolation — sandbox code runs as the runner user, sees host files and network, and limits are not enforced; for development only'
  readonly #stateDir: string
  readonly #agentEntry: string | undefined
  readonly #path: string
  readonly #nodePath: string
  readonly #exits = new Map<number, string>()
  readonly #compileCaches = new Map<string, Promise<string | null>>()

  /** Creates the driver; nothing is started until `create`. */
  constructor(options: LocalDriverOptions) {
    this.#stateDir = options.stateDir
    this.#agentEntry = options.agentEntry
    this.#path = options.path ?? process.env.PATH ?? DEFAULT_SANDBOX_PATH
    this.#nodePath = options.nodePath ?? process.execPath
  }

  /** The local driver enforces no limit at all, so it accepts none. */
  limitsProblem(limits: SandboxLimits): string | null {
    const asked = Object.keys(limits).filter((k) => limits[k as keyof SandboxLimits] !== undefined)
    return asked.length === 0
      ? null
      : `the local driver cannot enforce limits (${asked.join(', ')}); drop them or use an isolating driver`
  }

  /** Prepares `<stateDir>/sandboxes/<id>/workspace`. */
  async create(spec: SandboxSpec): Promise<DriverSandbox> {
    const dir = join(this.#stateDir, 'sandboxes', spec.id)
    const workdir = join(dir, 'workspace')
    mkdirSync(workdir, { recursive: true, mode: 0o700 })
    const state: LocalState = { dir, socketDir: join(dir, 'link'), linkSecret: spec.linkSecret }
    return { id: spec.id, workdir, state }
  }

  /** Spawns the agent detached, logging to `agent.log` in the sandbox folder. */
  async startAgent(sandbox: DriverSandbox, spec: SandboxSpec): Promise<DriverSandbox> {
    const state = LocalState.parse(sandbox.state)
    const entry = await locateAgentBundle(this.#agentEntry)
    const endpoint = await bindAgentSocket(state.socketDir)
    const logFd = openSync(join(state.dir, 'agent.log'), 'a', 0o600)
    try {
      // Sandbox code runs as the runner's own user, so the shells are told that user's name.
      const env: Record<string, string> = {
        ...sandboxBaseEnv({ user: userInfo().username, home: sandbox.workdir, path: this.#path }),
        ...spec.env,
      }
      const child = spawn(
        this.#nodePath,
        agentCommand(
          this.#nodePath,
          entry,
          {
            listenFd: 3,
            secretFd: 4,
            root: sandbox.workdir,
            tempRoot: localTempRoot(state.dir),
            scrollbackBytes: spec.scrollbackBytes,
            maxSessions: spec.maxSessions,
          },
          (await this.#compileCache(entry)) ?? undefined,
        ).slice(1),
        { detached: true, stdio: ['ignore', logFd, logFd, endpoint.fd, 'pipe'], env, cwd: sandbox.workdir },
      )
      const pid = await new Promise<number>((resolve, reject) => {
        child.once('error', (error) =>
          reject(
            new RunnerError('AGENT_UNAVAILABLE', `could not start the agent: ${error.message}`, {
              cause: error,
            }),
          ),
        )
        child.once('spawn', () => resolve(child.pid ?? 0))
      })
      sendLinkSecret(child, 4, state.linkSecret)
      child.once('exit', (code, signal) => {
        this.#exits.set(pid, signal ? `agent killed by ${signal}` : `agent exited with code ${code}`)
      })
      child.unref()
      return { ...sandbox, state: { ...state, pid } }
    } finally {
      endpoint.close()
      closeSync(logFd)
    }
  }

  /**
   * V8's compile cache of the agent bundle, shared by this runner's local agents. Node writes a
   * cache when a process exits, and an agent lives for hours, so the driver fills it once per
   * bundle by loading the bundle with the agent's flags, which stops at its usage check (exit 2).
   * Sandbox code runs as the runner's user here anyway, so a cache it could write gives it
   * nothing it lacks. Null (no cache) when the fill does not finish.
   */
  #compileCache(entry: string): Promise<string | null> {
    let filled = this.#compileCaches.get(entry)
    if (!filled) {
      const dir = join(this.#stateDir, 'agent-compile-cache')
      mkdirSync(dir, { recursive: true, mode: 0o700 })
      filled = new Promise((resolve) => {
        const child = spawn(this.#nodePath, [...AGENT_NODE_FLAGS, compileCacheFlag(dir), entry], {
          stdio: 'ignore',
          env: {},
          timeout: 30_000,
        })
        child.once('error', () => resolve(null))
        child.once('exit', (code) => resolve(code === 2 ? dir : null))
      })
      this.#compileCaches.set(entry, filled)
    }
    return filled
  }

  /** Connects to the agent's socket, retrying while the agent is starting. */
  async connect(sandbox: DriverSandbox, timeoutMs: number): Promise<Duplex> {
    const state = LocalState.parse(sandbox.state)
    return connectToAgent(
      {
        sandboxId: sandbox.id,
        socketDir: state.socketDir,
        logHint: 'agent.log in its folder',
        isAlive: () => this.isAlive(sandbox),
      },
      timeoutMs,
    )
  }

  /** True while the agent's pid exists. */
  async isAlive(sandbox: DriverSandbox): Promise<Liveness> {
    const state = LocalState.parse(sandbox.state)
    if (!state.pid) return { alive: false, reason: 'the agent was never started' }
    const exit = this.#exits.get(state.pid)
    if (exit) return { alive: false, reason: exit }
    try {
      process.kill(state.pid, 0)
      return { alive: true, reason: null }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EPERM') return { alive: true, reason: null }
      return { alive: false, reason: `agent process ${state.pid} is no longer running` }
    }
  }

  /** Kills the agent's process group and every descendant, SIGTERM then SIGKILL. */
  async stop(sandbox: DriverSandbox): Promise<void> {
    const state = LocalState.parse(sandbox.state)
    if (!state.pid) return
    const tree = [state.pid, ...descendantsOf(state.pid)]
    const signalAll = (signal: NodeJS.Signals): void => {
      for (const pid of tree) {
        try {
          process.kill(-pid, signal)
        } catch {
          // not a group leader, or gone
        }
        try {
          process.kill(pid, signal)
        } catch {
          // gone
        }
      }
    }
    signalAll('SIGTERM')
    const deadline = Date.now() + 1_000
    while (Date.now() < deadline && (await this.isAlive(sandbox)).alive) {
      await new Promise((r) => setTimeout(r, 20))
    }
    signalAll('SIGKILL')
  }

  /** Stops the agent and deletes the sandbox folder and socket. */
  /** The workspace: the same folder inside and out. */
  hostWorkspace(sandbox: DriverSandbox): string {
    return sandbox.workdir
  }

  async destroy(sandbox: DriverSandbox): Promise<void> {
    await this.stop(sandbox)
    const state = LocalState.parse(sandbox.state)
    await releaseWorkspaceOverlay(sandbox.workdir)
    rmSync(state.dir, { recursive: true, force: true })
  }
}
