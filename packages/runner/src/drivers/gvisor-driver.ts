// The gVisor driver: each sandbox is a runsc container, so its code talks to gVisor's kernel
// (the sentry, a user-space kernel on the ptrace platform), never to the host's: a host kernel
// bug is not an escape. The agent is the container's process (under a `sh` that reaps orphans),
// root inside gVisor with a few capabilities and no_new_privs; its shells run as the sandbox
// user (default 1000). The file layout is in oci-spec.ts, the agent's files in agent-runtime.ts.
//
// Link: runsc runs with `--host-uds=create`, so the agent creates its listening socket in the
// sandbox's link dir (a host dir owned by root, mode 0700, bound at /run/conch), where the runner
// connects after checking it (agent-endpoint.ts). The link secret is a root-only 0400 file in
// that dir, which the agent reads and deletes at start (`--secretFile`); the sandbox user can
// enter neither. `--network=none` leaves the sandbox only its own loopback.
//
// Limits: memory, CPU and a backstop on host tasks are the cgroup resources of the whole sandbox
// (sentry, gofer and stubs). gVisor has no OOM killer of its own: a sandbox past its memory
// cgroup is killed whole by the host. So the sandbox user's processes also get RLIMIT_AS from
// the preload (gvisor-preload.ts), which makes a memory hog fail alone, and RLIMIT_NPROC, which
// stops a fork bomb inside gVisor before the host backstop. The workspace is a loop-mounted disk
// when a disk limit is set (workspace-disk.ts).
//
// Handle: the runsc state dir, the container id (the sandbox id) and the host paths. It is alive
// while `runsc state` says running; `runsc run --detach` makes it outlive the runner. Stop is
// `runsc delete --force`; destroy also unmounts the disk and deletes the folder.
import { spawn, spawnSync } from 'node:child_process'
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import type { Duplex } from 'node:stream'
import type { SandboxLimits } from '@conch/protocol'
import { AGENT_NODE_FLAGS } from '@conch/protocol'
import { z } from 'zod'
import { RunnerError } from '../runner-error.ts'
import { agentSocketPath, ensurePrivateDir } from './agent-endpoint.ts'
import { type AgentRuntime, GUEST_RUNTIME_DIR, locateAgentRuntime } from './agent-runtime.ts'
import { connectToAgent } from './agent-socket.ts'
import {
  buildPreload,
  findCompiler,
  GUEST_PRELOAD_PATH,
  GUEST_PROCESS_MEMORY_FILE,
} from './gvisor-preload.ts'
import { hostSystemSymlinks, ociSpec } from './oci-spec.ts'
import { DEFAULT_RUNTIME_CACHE, mountRuntimeImage } from './runtime-image.ts'
import type { DriverSandbox, Liveness, SandboxDriver, SandboxSpec } from './sandbox-driver.ts'
import { SANDBOX_HOSTNAME, sandboxEtcFiles } from './sandbox-etc-files.ts'
import { AGENT_MEMORY_RESERVE_BYTES } from './work-cgroup.ts'
import { createDisk, diskProblem, removeDisk } from './workspace-disk.ts'

/** The workspace as the sandbox's shells see it. */
const GUEST_WORKSPACE = '/workspace'

/** The link dir as the agent sees it. */
const GUEST_LINK_DIR = '/run/conch'

/** The secret file's name in the link dir. */
const SECRET_NAME = 'secret'

/** Folders searched for runsc. */
const RUNSC_DIRS = ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/bin', '/sbin']

/** Where cgroups are mounted (v1 controllers below it, or the v2 tree). */
const CGROUP_ROOT = '/sys/fs/cgroup'

/**
 * Host tasks (sentry threads, stubs, gofer) a sandbox may use per process of its user, plus a
 * base: on the ptrace platform one guest process costs about 23 host tasks, and an idle sandbox
 * about 210. Past this backstop gVisor cannot make a stub and the whole sandbox dies.
 */
const HOST_TASKS_PER_PROCESS = 32
const HOST_TASKS_BASE = 1024

/** Processes the sandbox user may have when the limits name none. */
const DEFAULT_USER_PROCESSES = 1024

/** The gVisor driver's handle state. */
const GvisorState = z.object({
  /** Folder holding the bundle, the skeleton root, the workspace, the link dir and the log. */
  dir: z.string(),
  /** runsc's state dir (`--root`). */
  runscRoot: z.string(),
  /** The workspace on the host. */
  workspace: z.string(),
  /** The generated /etc files on the host. */
  etcDir: z.string(),
  /** Whether the workspace is on the sandbox's own loop-mounted disk. */
  disk: z.boolean(),
  /** The link dir (0700, root's): the agent's socket and, until the agent starts, the secret. */
  socketDir: z.string(),
  /** The sandbox's link secret. */
  linkSecret: z.string(),
  /** The cgroup path runsc makes under each controller. */
  cgroupsPath: z.string(),
})
type GvisorState = z.infer<typeof GvisorState>

/** Options of the gVisor driver. */
export interface GvisorDriverOptions {
  /** The runner's state dir; sandboxes live in `<stateDir>/sandboxes/<id>`, runsc state in `<stateDir>/runsc`. */
  stateDir: string
  /** Uid and gid of the sandbox user inside (and of its workspace files on the host); default 1000. */
  uid?: number
  /** A root filesystem dir to use instead of the host's system dirs (read-only; runsc adds mount points to it). */
  rootfs?: string
  /** The agent's entry file; defaults to `@conch/agent/main` resolved from this package. */
  agentEntry?: string
  /** Node binary that runs the agent; defaults to the runner's own. */
  nodePath?: string
  /** Where the agent's runtime image and the preload library are kept (see runtime-image.ts). */
  runtimeCacheDir?: string
  /** The runsc binary; found in the system folders when absent. */
  runscPath?: string
}

/** The first runsc in the system folders. */
function findRunsc(): string | null {
  for (const dir of RUNSC_DIRS) if (existsSync(join(dir, 'runsc'))) return join(dir, 'runsc')
  return null
}

/** A driver that runs each agent in a gVisor (runsc) sandbox. */
export class GvisorDriver implements SandboxDriver {
  /** Driver name. */
  readonly name = 'gvisor'
  /** gVisor is a separate kernel between the sandbox and the host, as a VM is. */
  readonly isolation = 'vm' as const
  /** What users are told on every sandbox. */
  readonly description =
    "gvisor driver: a runsc sandbox on the ptrace platform; its code runs on gVisor's own kernel, not the host's, as an unprivileged uid with no capabilities, no network but loopback, read-only system dirs, only its workspace writable, cgroup limits on memory, CPU and host tasks, and per-process memory and process-count limits; a process over its memory limit fails alone, but a sandbox whose processes together exceed the memory cgroup is killed whole"
  readonly #stateDir: string
  readonly #uid: number
  readonly #rootfs: string | undefined
  readonly #agentEntry: string | undefined
  readonly #nodePath: string
  readonly #runtimeCache: string
  readonly #runsc: string | null
  #runtime: Promise<AgentRuntime> | undefined
  #version: string | null | undefined

  /** Creates the driver; nothing is checked or started until `create`. */
  constructor(options: GvisorDriverOptions) {
    this.#stateDir = options.stateDir
    this.#uid = options.uid ?? 1000
    this.#rootfs = options.rootfs
    this.#agentEntry = options.agentEntry
    this.#nodePath = options.nodePath ?? process.execPath
    this.#runtimeCache = options.runtimeCacheDir ?? DEFAULT_RUNTIME_CACHE
    this.#runsc = options.runscPath ?? findRunsc()
  }

  /** runsc's version line, or null when it does not run. */
  version(): string | null {
    if (this.#version !== undefined) return this.#version
    const result = this.#runsc ? spawnSync(this.#runsc, ['--version'], { encoding: 'utf8' }) : null
    this.#version = result?.status === 0 ? (result.stdout.split('\n')[0]?.trim() ?? null) : null
    return this.#version
  }

  /** Why this host cannot run gVisor sandboxes with these limits, or null when it can. */
  problem(spec: Pick<SandboxSpec, 'limits'> = { limits: {} }): string | null {
    if (process.platform !== 'linux') return 'the gvisor driver needs Linux'
    if (process.getuid?.() !== 0)
      return 'the gvisor driver needs a runner running as root (runsc sets up namespaces and cgroups)'
    if (!this.#runsc || !existsSync(this.#runsc))
      return `runsc is not installed (looked ${this.#runsc ? `for ${this.#runsc}` : `in ${RUNSC_DIRS.join(', ')}`}); apt-get install runsc`
    if (!this.version())
      return `${this.#runsc} --version fails; reinstall runsc (apt-get install --reinstall runsc)`
    if (!findCompiler())
      return 'no C compiler to build the sandbox preload library; apt-get install gcc libc6-dev'
    if (this.#rootfs !== undefined && !existsSync(join(this.#rootfs, 'bin', 'sh')))
      return `the rootfs ${this.#rootfs} has no /bin/sh; give a directory holding a Linux root filesystem`
    if (this.#rootfs !== undefined && (statSync(this.#rootfs).mode & 0o005) !== 0o005)
      return `the rootfs ${this.#rootfs} is closed to the sandbox user; chmod 755 it`
    return this.limitsProblem(spec.limits)
  }

  /** Why these limits cannot be enforced here (no loop devices for a disk limit), or null. */
  limitsProblem(limits: SandboxLimits): string | null {
    return limits.diskBytes === undefined ? null : diskProblem()
  }

  /** Prepares the sandbox folder: workspace (on its disk when limited), link dir and /etc files. */
  async create(spec: SandboxSpec): Promise<DriverSandbox> {
    const problem = this.problem(spec)
    if (problem) throw new RunnerError('AGENT_UNAVAILABLE', `cannot create sandbox ${spec.id}: ${problem}`)
    const dir = join(this.#stateDir, 'sandboxes', spec.id)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const socketDir = join(dir, 'link')
    ensurePrivateDir(socketDir)
    const disk =
      spec.limits.diskBytes === undefined ? undefined : createDisk(dir, spec.limits.diskBytes, this.#uid)
    const workspace = disk?.workspace ?? join(dir, 'workspace')
    const etcDir = disk?.etc ?? join(dir, 'etc')
    mkdirSync(workspace, { recursive: true, mode: 0o700 })
    chownSync(workspace, this.#uid, this.#uid)
    mkdirSync(etcDir, { recursive: true, mode: 0o755 })
    const state: GvisorState = {
      dir,
      runscRoot: join(this.#stateDir, 'runsc'),
      workspace,
      etcDir,
      disk: disk !== undefined,
      socketDir,
      linkSecret: spec.linkSecret,
      cgroupsPath: `/conch-gvisor/${spec.id}`,
    }
    return { id: spec.id, workdir: GUEST_WORKSPACE, state }
  }

  /** Writes the bundle and starts the container detached (`runsc run --detach`), logging to `agent.log`. */
  async startAgent(sandbox: DriverSandbox, spec: SandboxSpec): Promise<DriverSandbox> {
    const state = GvisorState.parse(sandbox.state)
    this.#runtime ??= mountRuntimeImage(
      locateAgentRuntime(this.#nodePath, this.#agentEntry),
      this.#runtimeCache,
    )
    this.#runtime.catch(() => {
      this.#runtime = undefined
    })
    const runtime = await this.#runtime
    const preload = buildPreload(this.#runtimeCache)
    const memory = spec.limits.memoryBytes
    const pids = spec.limits.pids ?? DEFAULT_USER_PROCESSES

    const etcFiles: Record<string, string> = {
      ...sandboxEtcFiles(this.#uid, GUEST_WORKSPACE),
      'ld.so.preload': `${GUEST_PRELOAD_PATH}\n`,
      [GUEST_PROCESS_MEMORY_FILE.slice('/etc/'.length)]: memory === undefined ? '0\n' : `${memory}\n`,
    }
    for (const [name, text] of Object.entries(etcFiles))
      writeFileSync(join(state.etcDir, name), text, { mode: 0o644 })

    // The skeleton root holds the host's top-level symlinks (bin -> usr/bin) and the runtime's
    // symlinks; runsc adds the mount points it needs to whichever root it gets.
    const rootfs = this.#rootfs ?? join(state.dir, 'rootfs')
    const optDir = join(state.dir, 'opt')
    rmSync(optDir, { recursive: true, force: true })
    mkdirSync(optDir, { recursive: true, mode: 0o755 })
    for (const [target, path] of runtime.symlinks) {
      const at = join(optDir, path.slice(GUEST_RUNTIME_DIR.length))
      mkdirSync(dirname(at), { recursive: true })
      symlinkSync(target, at)
    }
    if (this.#rootfs === undefined) {
      rmSync(rootfs, { recursive: true, force: true })
      mkdirSync(rootfs, { mode: 0o755 })
      for (const [target, path] of hostSystemSymlinks()) {
        mkdirSync(dirname(join(rootfs, path)), { recursive: true })
        symlinkSync(target, join(rootfs, path))
      }
    }

    ensurePrivateDir(state.socketDir)
    rmSync(agentSocketPath(state.socketDir), { force: true })
    const secretFile = join(state.socketDir, SECRET_NAME)
    rmSync(secretFile, { force: true })
    writeFileSync(secretFile, state.linkSecret, { mode: 0o400 })

    const env: Record<string, string> = {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: GUEST_WORKSPACE,
      LANG: 'C.UTF-8',
      TERM: 'dumb',
      ...spec.env,
    }
    const agent = [
      runtime.node,
      ...AGENT_NODE_FLAGS,
      '--conditions=source',
      runtime.entry,
      '--socket',
      `${GUEST_LINK_DIR}/agent.sock`,
      '--secretFile',
      `${GUEST_LINK_DIR}/${SECRET_NAME}`,
      '--sandboxUid',
      String(this.#uid),
      '--sandboxGid',
      String(this.#uid),
      '--root',
      GUEST_WORKSPACE,
      '--scrollbackBytes',
      String(spec.scrollbackBytes),
      '--maxSessions',
      String(spec.maxSessions),
    ]
    const config = ociSpec({
      rootfs,
      hostSystem: this.#rootfs === undefined,
      hostname: SANDBOX_HOSTNAME,
      workspace: state.workspace,
      linkDir: state.socketDir,
      etcFiles: Object.fromEntries(Object.keys(etcFiles).map((n) => [n, join(state.etcDir, n)])),
      optDir,
      extraFiles: [{ host: preload, guest: GUEST_PRELOAD_PATH }],
      runtime,
      // /tmp and /dev/shm live in the sandbox's memory: their sizes keep inside its budget.
      ...(memory === undefined
        ? {}
        : {
            tmpBytes: Math.floor(memory / 2),
            shmBytes: Math.floor(memory / 4),
            memoryBytes: memory + AGENT_MEMORY_RESERVE_BYTES,
          }),
      userProcesses: pids,
      hostPids: hostTaskBackstop(pids),
      ...(spec.limits.cpus === undefined ? {} : { cpus: spec.limits.cpus }),
      cgroupsPath: state.cgroupsPath,
      env,
      // pid 1 is a shell that waits for the agent, reaping every orphan meanwhile (wait(2) takes
      // any child), and exits with the agent, which stops the container.
      args: ['/bin/sh', '-c', '"$@" & wait $!', 'conch-init', ...agent],
    })
    const bundle = join(state.dir, 'bundle')
    mkdirSync(bundle, { recursive: true, mode: 0o700 })
    writeFileSync(join(bundle, 'config.json'), JSON.stringify(config, null, 2), { mode: 0o600 })

    mkdirSync(state.runscRoot, { recursive: true, mode: 0o700 })
    await this.#deleteContainer(state, sandbox.id)
    const log = join(state.dir, 'agent.log')
    const logFd = openSync(log, 'a', 0o600)
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        const child = spawn(
          this.#runscPath(),
          [...this.#globalArgs(state), 'run', '--detach', '--bundle', bundle, sandbox.id],
          { detached: true, stdio: ['ignore', logFd, logFd], env: {}, cwd: '/' },
        )
        child.once('error', (error) =>
          reject(
            new RunnerError('AGENT_UNAVAILABLE', `could not start runsc: ${error.message}`, { cause: error }),
          ),
        )
        child.once('exit', (exitCode) => resolve(exitCode))
      })
      if (code !== 0) {
        const tail = readFileSync(log, 'utf8').trim().split('\n').slice(-3).join(' | ')
        throw new RunnerError(
          'AGENT_UNAVAILABLE',
          `runsc could not start sandbox ${sandbox.id} (exit ${code}): ${tail}; see agent.log in ${state.dir}`,
        )
      }
    } finally {
      closeSync(logFd)
    }
    return sandbox
  }

  /** Connects to the agent's socket in the link dir, retrying while the agent is starting. */
  async connect(sandbox: DriverSandbox, timeoutMs: number): Promise<Duplex> {
    const state = GvisorState.parse(sandbox.state)
    return connectToAgent(
      {
        sandboxId: sandbox.id,
        socketDir: state.socketDir,
        logHint: `agent.log in ${state.dir}`,
        isAlive: () => this.isAlive(sandbox),
      },
      timeoutMs,
    )
  }

  /** True while `runsc state` says the container runs. */
  async isAlive(sandbox: DriverSandbox): Promise<Liveness> {
    const state = GvisorState.parse(sandbox.state)
    const status = await this.#status(state, sandbox.id)
    if (status === 'running') return { alive: true, reason: null }
    const oom = this.#oomKills(state)
    const why = oom > 0 ? '; the host killed it for exceeding its memory limit' : ''
    return {
      alive: false,
      reason:
        status === null
          ? `gVisor container ${sandbox.id} no longer exists${why}`
          : `gVisor container ${sandbox.id} is ${status}${why}`,
    }
  }

  /** Kills and deletes the container (every process in it); the workspace stays. */
  async stop(sandbox: DriverSandbox): Promise<void> {
    const state = GvisorState.parse(sandbox.state)
    await this.#deleteContainer(state, sandbox.id)
    if ((await this.#status(state, sandbox.id)) !== null) {
      throw new RunnerError(
        'INTERNAL',
        `runsc delete --force left gVisor container ${sandbox.id}; see runsc list --root ${state.runscRoot}`,
      )
    }
    this.#removeCgroups(state)
  }

  /** Stops the container and deletes its folder, disk and cgroups. */
  async destroy(sandbox: DriverSandbox): Promise<void> {
    await this.stop(sandbox)
    const state = GvisorState.parse(sandbox.state)
    if (state.disk) removeDisk(state.dir)
    rmSync(state.dir, { recursive: true, force: true })
  }

  #runscPath(): string {
    if (!this.#runsc)
      throw new RunnerError('AGENT_UNAVAILABLE', 'runsc is not installed; apt-get install runsc')
    return this.#runsc
  }

  /** Flags every runsc call of this sandbox shares. */
  #globalArgs(state: GvisorState): string[] {
    return [
      '--root',
      state.runscRoot,
      '--platform=ptrace',
      '--network=none',
      '--host-uds=create',
      '--cpu-num-from-quota',
    ]
  }

  /** Runs runsc with the sandbox's flags; resolves with its exit code and output. */
  #run(state: GvisorState, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.#runscPath(), [...this.#globalArgs(state), ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {},
        cwd: '/',
      })
      let stdout = ''
      let stderr = ''
      child.stdout.setEncoding('utf8').on('data', (text: string) => {
        stdout += text
      })
      child.stderr.setEncoding('utf8').on('data', (text: string) => {
        stderr += text
      })
      child.once('error', reject)
      child.once('close', (code) => resolve({ code, stdout, stderr }))
    })
  }

  /** The container's status from `runsc state`, or null when runsc knows no such container. */
  async #status(state: GvisorState, id: string): Promise<string | null> {
    if (!existsSync(state.runscRoot)) return null
    const result = await this.#run(state, ['state', id])
    if (result.code !== 0) return null
    const parsed = z.object({ status: z.string() }).safeParse(JSON.parse(result.stdout))
    return parsed.success ? parsed.data.status : null
  }

  /** `runsc delete --force` of the container, when runsc knows it. */
  async #deleteContainer(state: GvisorState, id: string): Promise<void> {
    if ((await this.#status(state, id)) === null) return
    const result = await this.#run(state, ['delete', '--force', id])
    if (result.code !== 0 && (await this.#status(state, id)) !== null) {
      throw new RunnerError(
        'INTERNAL',
        `runsc delete --force ${id} failed: ${result.stderr.trim()}; see runsc list --root ${state.runscRoot}`,
      )
    }
  }

  /** How many times the host's OOM killer acted in the sandbox's memory cgroup (v1 or v2). */
  #oomKills(state: GvisorState): number {
    for (const file of [
      join(CGROUP_ROOT, 'memory', state.cgroupsPath, 'memory.oom_control'),
      join(CGROUP_ROOT, state.cgroupsPath, 'memory.events'),
    ]) {
      try {
        return Number(/oom_kill (\d+)/.exec(readFileSync(file, 'utf8'))?.[1] ?? 0)
      } catch {
        // not this cgroup version
      }
    }
    return 0
  }

  /** Removes the sandbox's cgroup dirs (v1 or v2) runsc left behind (they are empty once it is deleted). */
  #removeCgroups(state: GvisorState): void {
    let controllers: string[]
    try {
      controllers = readdirSync(CGROUP_ROOT)
    } catch {
      return
    }
    const dirs = [
      ...controllers.map((controller) => join(CGROUP_ROOT, controller, state.cgroupsPath)),
      join(CGROUP_ROOT, state.cgroupsPath),
    ]
    for (const dir of dirs) {
      try {
        rmdirSync(dir)
      } catch {
        // not there, or not a cgroup v1 controller dir
      }
    }
  }
}

/** The host-task backstop for `pids` user processes, never more than half the host's pid space. */
function hostTaskBackstop(pids: number): number {
  let pidMax = Number.POSITIVE_INFINITY
  try {
    pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'))
  } catch {
    // not Linux: no cap
  }
  return Math.min(HOST_TASKS_BASE + HOST_TASKS_PER_PROCESS * pids, Math.floor(pidMax / 2))
}
