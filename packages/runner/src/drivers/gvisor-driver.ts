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
// (sentry, gofer and stubs; gvisor-cgroup.ts). gVisor has no OOM killer of its own. When the
// sandbox's processes together fill its memory cgroup, either gVisor's allocation fails first,
// and the process asking is killed as below, or the host's OOM killer acts: on a ptrace stub
// (that one process dies) or on the sentry (the whole sandbox dies, reported as a memory death).
// The sandbox user's processes get RLIMIT_AS from the preload (gvisor-preload.ts), under which
// a memory hog is killed alone with SIGKILL and counted, and RLIMIT_NPROC, which stops a fork
// bomb inside gVisor before the host backstop. The agent is root inside, outside that count: a
// fork bomb cannot keep it from starting shells. The workspace is a loop-mounted disk when a disk limit is set
// (workspace-disk.ts). The bundle is written by gvisor-bundle.ts, runsc is run by runsc-cli.ts.
//
// Usage: memory, peak and CPU time from the host cgroup (what the sandbox costs the host,
// sentry included), processes from gVisor's own count (`runsc events --stats`), and OOM kills
// from the preload's counter plus the host's.
//
// Handle: the runsc state dir, the container id (the sandbox id) and the host paths. It is alive
// while `runsc state` says running; `runsc run --detach` makes it outlive the runner. Stop is
// `runsc delete --force`; destroy also unmounts the disk and deletes the folder.
import { spawnSync } from 'node:child_process'
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import type { SandboxLimits, SandboxUsage } from '@conch/protocol'
import { z } from 'zod'
import { RunnerError } from '../runner-error.ts'
import { releaseWorkspaceOverlay } from '../snapshots/workspace-overlay.ts'
import { agentSocketPath, ensurePrivateDir } from './agent-endpoint.ts'
import { locateAgentRuntime } from './agent-runtime.ts'
import { connectToAgent } from './agent-socket.ts'
import { GUEST_WORKSPACE, oomEventsFile, writeGvisorBundle } from './gvisor-bundle.ts'
import {
  gvisorCgroupStats,
  gvisorCgroupsPath,
  gvisorHostOomKills,
  removeGvisorCgroups,
} from './gvisor-cgroup.ts'
import { buildPreload, findCompiler } from './gvisor-preload.ts'
import { findRunsc, RUNSC_DIRS, RunscCli } from './runsc-cli.ts'
import { DEFAULT_RUNTIME_CACHE, RuntimeImage } from './runtime-image.ts'
import type { DriverSandbox, Liveness, SandboxDriver, SandboxSpec } from './sandbox-driver.ts'
import { UnrecordedReaper } from './unrecorded-sandboxes.ts'
import { createDisk, diskProblem, removeDisk } from './workspace-disk.ts'

/** The marker a suspended agent writes in its link dir (the agent's link-suspend.ts). */
const SUSPENDED_MARKER = 'suspended'

/** How long the agent may take to close its link sockets after `link.suspend`. */
const SUSPEND_TIMEOUT_MS = 10_000

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
  /** The agent's source main file to bundle; defaults to the shipped bundle (see agent-bundle.ts). */
  agentEntry?: string
  /** Node binary that runs the agent; defaults to the runner's own. */
  nodePath?: string
  /** Where the agent's runtime image and the preload library are kept (see runtime-image.ts). */
  runtimeCacheDir?: string
  /** The runsc binary; found in the system folders when absent. */
  runscPath?: string
}

/** A driver that runs each agent in a gVisor (runsc) sandbox. */
export class GvisorDriver implements SandboxDriver {
  /** Driver name. */
  readonly name = 'gvisor'
  /** gVisor is a separate kernel between the sandbox and the host, as a VM is. */
  readonly isolation = 'vm' as const
  /** What users are told on every sandbox. */
  readonly description =
    "gvisor driver: a runsc sandbox on the ptrace platform; its code runs on gVisor's own kernel, not the host's, as an unprivileged uid with no capabilities, no network but loopback, read-only system dirs, only its workspace writable, cgroup limits on memory, CPU and host tasks, and per-process memory and process-count limits; a process over its memory limit is killed alone, processes that together fill the memory cgroup are killed until the sandbox fits, and a sandbox whose kernel the host must kill for memory dies whole, saying why"
  readonly #stateDir: string
  readonly #uid: number
  /** The ids inside `create` now, and the reap of what a killed runner left unrecorded. */
  readonly #unrecorded: UnrecordedReaper
  readonly #rootfs: string | undefined
  readonly #agentEntry: string | undefined
  readonly #nodePath: string
  readonly #runtimeCache: string
  readonly #runsc: string | null
  #runtime: Promise<RuntimeImage> | undefined
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
    this.#unrecorded = new UnrecordedReaper(this.#stateDir, this.name, (sandbox) => this.destroy(sandbox))
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

  /**
   * Removes the folders (and disks) a killed runner left unrecorded (unrecorded-sandboxes.ts).
   * A create here starts no process and makes no cgroup, so a folder without a handle is all
   * there is to remove.
   */
  reapUnrecorded(known: ReadonlySet<string>): Promise<string[]> {
    return this.#unrecorded.reap(known)
  }

  /** Prepares the sandbox folder: workspace (on its disk when limited), link dir and /etc files. */
  async create(spec: SandboxSpec): Promise<DriverSandbox> {
    const problem = this.problem(spec)
    if (problem) throw new RunnerError('AGENT_UNAVAILABLE', `cannot create sandbox ${spec.id}: ${problem}`)
    return this.#unrecorded.creating(spec.id, () => this.#create(spec))
  }

  async #create(spec: SandboxSpec): Promise<DriverSandbox> {
    const dir = join(this.#stateDir, 'sandboxes', spec.id)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const socketDir = join(dir, 'link')
    ensurePrivateDir(socketDir)
    const disk =
      spec.limits.diskBytes === undefined
        ? undefined
        : await createDisk(dir, spec.limits.diskBytes, this.#uid)
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
      cgroupsPath: gvisorCgroupsPath(spec.id),
    }
    return { id: spec.id, workdir: GUEST_WORKSPACE, state }
  }

  /** Writes the bundle and starts the container detached (`runsc run --detach`), logging to `agent.log`. */
  async startAgent(sandbox: DriverSandbox, spec: SandboxSpec): Promise<DriverSandbox> {
    return this.#start(sandbox, spec, null)
  }

  /**
   * Restores a checkpoint image (`checkpoint`) as this sandbox: the bundle is written for its
   * own folders and link secret (the restored agent, waiting in `link.suspend`, reads that
   * secret file and listens again), then `runsc restore --detach`.
   */
  async restoreAgent(sandbox: DriverSandbox, spec: SandboxSpec, imageDir: string): Promise<DriverSandbox> {
    return this.#start(sandbox, spec, imageDir)
  }

  /**
   * Checkpoints the sandbox into `imageDir` (the container stops): waits until its agent,
   * asked to `link.suspend`, has closed every link socket (its `suspended` marker), removes the
   * link socket's file, then `runsc checkpoint`. gVisor cannot save a socket bound to or
   * connected through the host, and a failed checkpoint leaves the sandbox stopped.
   */
  async checkpoint(sandbox: DriverSandbox, imageDir: string): Promise<void> {
    const state = GvisorState.parse(sandbox.state)
    const marker = join(state.socketDir, SUSPENDED_MARKER)
    const deadline = Date.now() + SUSPEND_TIMEOUT_MS
    while (!existsSync(marker)) {
      if (Date.now() > deadline) {
        // Hand the agent its secret back so it listens again: the sandbox goes on unsnapshotted.
        writeFileSync(join(state.socketDir, 'secret'), state.linkSecret, { mode: 0o400 })
        throw new RunnerError(
          'AGENT_UNAVAILABLE',
          `the agent of sandbox ${sandbox.id} did not suspend its link within ${SUSPEND_TIMEOUT_MS} ms; no snapshot was taken`,
        )
      }
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    rmSync(agentSocketPath(state.socketDir), { force: true })
    rmSync(marker, { force: true })
    await this.#cli(state).checkpoint(sandbox.id, imageDir)
  }

  async #start(sandbox: DriverSandbox, spec: SandboxSpec, imageDir: string | null): Promise<DriverSandbox> {
    const state = GvisorState.parse(sandbox.state)
    this.#runtime ??= locateAgentRuntime(this.#nodePath, this.#agentEntry).then(
      (runtime) => new RuntimeImage(runtime, this.#runtimeCache),
    )
    this.#runtime.catch(() => {
      this.#runtime = undefined
    })
    // Acquired for every start and restore: the gofer binds the image's mount as it starts.
    const bundle = writeGvisorBundle({
      paths: state,
      spec,
      runtime: await (await this.#runtime).acquire(),
      preload: buildPreload(this.#runtimeCache),
      uid: this.#uid,
      rootfs: this.#rootfs,
    })
    mkdirSync(state.runscRoot, { recursive: true, mode: 0o700 })
    const runsc = this.#cli(state)
    await runsc.delete(sandbox.id)
    const log = join(state.dir, 'agent.log')
    if (imageDir === null) await runsc.runDetached(bundle, sandbox.id, log)
    else await runsc.restoreDetached(bundle, sandbox.id, imageDir, log)
    return { ...sandbox, state: { ...state, linkSecret: spec.linkSecret } }
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
    const status = await this.#cli(state).status(sandbox.id)
    if (status === 'running') return { alive: true, reason: null }
    const why =
      gvisorHostOomKills(sandbox.id) > 0 ? '; the host killed it for exceeding its memory limit' : ''
    return {
      alive: false,
      reason:
        status === null
          ? `gVisor container ${sandbox.id} no longer exists${why}`
          : `gVisor container ${sandbox.id} is ${status}${why}`,
    }
  }

  /**
   * Memory (now and at peak) and CPU time of the host cgroup, processes inside gVisor, and OOM
   * kills (the preload's and the host's); null once the container's groups are gone.
   */
  async usage(sandbox: DriverSandbox): Promise<SandboxUsage | null> {
    const state = GvisorState.parse(sandbox.state)
    const host = gvisorCgroupStats(sandbox.id)
    if (host === null) return null
    const guest = await this.#cli(state).stats(sandbox.id)
    return {
      ...host,
      pids: guest?.pids ?? host.pids,
      oomKills: host.oomKills + guestOomKills(oomEventsFile(state)),
    }
  }

  /** Kills and deletes the container (every process in it); the workspace stays. */
  async stop(sandbox: DriverSandbox): Promise<void> {
    const state = GvisorState.parse(sandbox.state)
    const runsc = this.#cli(state)
    await runsc.delete(sandbox.id)
    if ((await runsc.status(sandbox.id)) !== null) {
      throw new RunnerError(
        'INTERNAL',
        `runsc delete --force left gVisor container ${sandbox.id}; see runsc list --root ${state.runscRoot}`,
      )
    }
    removeGvisorCgroups(sandbox.id)
  }

  /** The workspace on the host: its folder, or the folder on its disk. */
  hostWorkspace(sandbox: DriverSandbox): string {
    return GvisorState.parse(sandbox.state).workspace
  }

  /** Stops the container and deletes its folder, disk and cgroups. */
  async destroy(sandbox: DriverSandbox): Promise<void> {
    await this.stop(sandbox)
    const state = GvisorState.parse(sandbox.state)
    await releaseWorkspaceOverlay(state.workspace)
    if (state.disk) await removeDisk(state.dir)
    rmSync(state.dir, { recursive: true, force: true })
  }

  /** runsc on the sandbox's state dir. */
  #cli(state: GvisorState): RunscCli {
    if (!this.#runsc)
      throw new RunnerError('AGENT_UNAVAILABLE', 'runsc is not installed; apt-get install runsc')
    return new RunscCli(this.#runsc, state.runscRoot)
  }
}

/** Bytes of the OOM counter file read: `oom_kill N` fits; sandbox code may have made it larger. */
const OOM_FILE_READ_BYTES = 64

/** The `oom_kill N` count the preload keeps in `file` (its first bytes only); 0 when unreadable. */
function guestOomKills(file: string): number {
  let fd: number
  try {
    fd = openSync(file, 'r')
  } catch {
    return 0
  }
  try {
    const buffer = Buffer.alloc(OOM_FILE_READ_BYTES)
    const n = readSync(fd, buffer, 0, buffer.length, 0)
    const count = Number(/^oom_kill (\d+)$/m.exec(buffer.toString('latin1', 0, n))?.[1] ?? 0)
    return Math.min(count, Number.MAX_SAFE_INTEGER)
  } finally {
    closeSync(fd)
  }
}
