// The namespace driver: each sandbox is a bubblewrap sandbox on the host, Linux only, run by a
// root runner. Its agent runs as an unprivileged uid (default 1000, the same number on the host)
// with no capabilities and no_new_privs, in new user, pid, mount, ipc, uts, net (loopback only)
// and cgroup namespaces, with an environment that is exactly the sandbox's own. The file layout
// is in bwrap-args.ts (namespace-bwrap-options.ts fills it from a sandbox's state), the agent's
// files in agent-runtime.ts and runtime-image.ts, limits in cgroups.ts (v1 or v2, whichever the
// host has) and what a host allows in namespace-host.ts, the workspace disk in workspace-disk.ts,
// the chain's spawn in namespace-chain.ts and its script in sandbox-launch.ts.
//
// Start: the runner makes a user namespace owned by the sandbox uid whose maps are `0 0 1` and
// `uid uid 1`, written by the runner (only root may map host root). bwrap joins it with
// `--userns` while running as the sandbox uid, so it has capabilities in that namespace to build
// the mounts, and, because host root is mapped, it can reach host paths a 0700 root dir hides
// (the runner's state dir); it then drops every capability before the agent starts. The chain is
// `sh` (root: joins the cgroups, so every later fork is counted) → `setpriv` (to the sandbox
// uid) → `bwrap` → the sandbox's pid 1 → the agent. All are detached from the runner (setsid),
// so the agent outlives a runner restart. `create` starts the chain and `sh` holds it after its
// cgroup joins (which can wait for an RCU grace period) until `startAgent` writes `go`, so the
// joins overlap the disk's setup; nothing of the sandbox runs before that.
//
// Handle: the pid and start time of that first process (bwrap after exec), the host paths and
// the cgroup dirs. It is alive while that (pid, start time) exists and is not a zombie. Stop
// kills the sandbox's pid 1, which takes its whole pid namespace down, and every process left
// in its cgroups. Destroy also removes the folder and the cgroups.
//
// Rootless (the runner is not root): bwrap makes the user namespace itself, mapping the runner's
// uid to the sandbox uid; the agent runs as that uid with no capabilities, the workspace is a
// directory in the state dir, the runtime is bound from its host paths, and limits come from a
// delegated cgroup v2 subtree or, for pids alone, RLIMIT_NPROC (see rootless-host.ts).
import { chownSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import type { SandboxLimits, SandboxUsage } from '@conch/protocol'
import { RunnerError } from '../runner-error.ts'
import { releaseWorkspaceOverlay } from '../snapshots/workspace-overlay.ts'
import { ensurePrivateDir, sendLinkSecret } from './agent-endpoint.ts'
import { type AgentRuntime, locateAgentRuntime } from './agent-runtime.ts'
import { connectToAgent } from './agent-socket.ts'
import type { Cgroups, SandboxCgroup } from './cgroups.ts'
import { ChainExits } from './chain-exits.ts'
import { namespaceBwrapOptions } from './namespace-bwrap-options.ts'
import { spawnChain } from './namespace-chain.ts'
import { NamespaceHost } from './namespace-host.ts'
import { GUEST_WORKSPACE, NamespaceState } from './namespace-state.ts'
import { childrenOf, procStat } from './proc-stat.ts'
import { type RootlessLimits, runsRootless } from './rootless-host.ts'
import { removeOwnTree } from './rootless-workspace.ts'
import { DEFAULT_RUNTIME_CACHE, RuntimeImage } from './runtime-image.ts'
import type { DriverSandbox, Liveness, SandboxDriver, SandboxSpec } from './sandbox-driver.ts'
import { sandboxEtcFiles } from './sandbox-etc-files.ts'
import { type DiskFormat, diskReady, endLaunch, feedArgs, type Launch, release } from './sandbox-launch.ts'
import { bwrapSeccomp, feedSeccomp } from './seccomp-filter.ts'
import { recordCreated, UnrecordedReaper } from './unrecorded-sandboxes.ts'
import { AGENT_MEMORY_RESERVE_BYTES } from './work-cgroup.ts'
import {
  diskFormat,
  diskPaths,
  finishDisk,
  prepareDisk,
  removeDisk,
  spareRefill,
  takeSpareDisk,
} from './workspace-disk.ts'

/** Options of the namespace driver. */
export interface NamespaceDriverOptions {
  /** The runner's state dir; sandboxes live in `<stateDir>/sandboxes/<id>`. */
  stateDir: string
  /** Uid and gid of sandbox processes, inside and on the host; default 1000. */
  uid?: number
  /** The agent's source main file to bundle; defaults to the shipped bundle (see agent-bundle.ts). */
  agentEntry?: string
  /** Node binary that runs the agent; defaults to the runner's own. */
  nodePath?: string
  /** The host's cgroups; detected (v1 or v2) when not given. */
  cgroups?: Cgroups
  /** Where the agent's runtime image is kept and mounted (see runtime-image.ts). */
  runtimeCacheDir?: string
  /** Run rootless (see rootless-host.ts); default: when the runner is not root. */
  rootless?: boolean
  /** Rootless only: what limits this host allows; detected when not given. */
  rootlessLimits?: RootlessLimits
}

/** A driver that runs each agent in a bubblewrap sandbox with cgroup (v1 or v2) limits. */
export class NamespaceDriver implements SandboxDriver {
  /** Driver name. */
  readonly name = 'namespace'
  /** Linux namespaces. */
  readonly isolation = 'namespace' as const
  /** Whether this driver runs rootless (the runner is not root). */
  readonly rootless: boolean
  readonly #stateDir: string
  readonly #uid: number
  readonly #agentEntry: string | undefined
  readonly #nodePath: string
  readonly #host: NamespaceHost
  readonly #exits = new ChainExits()
  readonly #runtimeCache: string
  #runtime: Promise<AgentRuntime | RuntimeImage> | undefined
  /** bwrap's seccomp filter, built on first use. */
  #seccomp: ReturnType<typeof bwrapSeccomp> | undefined
  /** Each created sandbox's chain, held before bwrap until `startAgent` releases it. */
  readonly #launches = new Map<string, Launch>()
  /** The ids inside `create` now, and the reap of what a killed runner left unrecorded. */
  readonly #unrecorded: UnrecordedReaper

  /** Creates the driver; nothing is checked or started until `create`. */
  constructor(options: NamespaceDriverOptions) {
    this.#stateDir = options.stateDir
    this.#uid = options.uid ?? 1000
    this.#agentEntry = options.agentEntry
    this.#nodePath = options.nodePath ?? process.execPath
    this.#runtimeCache = options.runtimeCacheDir ?? DEFAULT_RUNTIME_CACHE
    this.rootless = options.rootless ?? runsRootless()
    this.#host = new NamespaceHost(this.rootless, options.cgroups, options.rootlessLimits)
    this.#unrecorded = new UnrecordedReaper(this.#stateDir, this.name, (sandbox) => this.destroy(sandbox))
  }

  /** What users are told on every sandbox: what isolates it and which limits hold on this host. */
  get description(): string {
    return this.#host.description
  }

  /** The runner's default limits that this driver enforces here: all as root, a subset rootless. */
  enforceableDefaults(defaults: SandboxLimits): SandboxLimits {
    return this.#host.enforceableDefaults(defaults)
  }

  /** For the startup log: the limits this driver cannot enforce here; null when it enforces all. */
  hostWarning(): string | null {
    return this.#host.hostWarning()
  }

  /** Why this host cannot run namespace sandboxes with these limits, or null when it can. */
  problem(spec: Pick<SandboxSpec, 'limits'> = { limits: {} }): string | null {
    return this.#host.problem(spec)
  }

  /** Why these limits cannot be enforced here (no usable cgroups, a missing controller, no loop devices), or null. */
  limitsProblem(limits: SandboxLimits): string | null {
    return this.#host.limitsProblem(limits)
  }

  /**
   * Prepares the sandbox folder (workspace, socket dir, /etc files) and its cgroups, and starts
   * its process chain held before bwrap builds anything (see `#launch`). The disk's format and
   * mount, the user namespace, the chain's cgroup joins (a write to cgroup.procs can wait for an
   * RCU grace period) and its execs proceed at once: each waits on the kernel or a child, not on
   * the others. No sandbox code can run until `startAgent` hands bwrap its options.
   */
  async create(spec: SandboxSpec): Promise<DriverSandbox> {
    const problem = this.problem(spec)
    if (problem) throw new RunnerError('AGENT_UNAVAILABLE', `cannot create sandbox ${spec.id}: ${problem}`)
    return this.#unrecorded.creating(spec.id, () => this.#create(spec))
  }

  /** Destroys the sandboxes a killed runner left unrecorded (unrecorded-sandboxes.ts). */
  reapUnrecorded(known: ReadonlySet<string>): Promise<string[]> {
    return this.#unrecorded.reap(known)
  }

  async #create(spec: SandboxSpec): Promise<DriverSandbox> {
    const dir = join(this.#stateDir, 'sandboxes', spec.id)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    ensurePrivateDir(join(dir, 'link'))
    // The chain mounts the disk (formatting it first unless it is the spare, see workspace-disk.ts)
    // and then formats the next spare (see `chainArgs`): no runner spawn per tool.
    let disk: DiskFormat | null = null
    let diskMade: Promise<void> = Promise.resolve()
    let cgroup: SandboxCgroup | null = null
    let launch: Launch | undefined
    try {
      const { memoryBytes, cpus, pids } = spec.limits
      cgroup =
        this.#host.sandboxCgroups()?.create({
          id: spec.id,
          limits: { memoryBytes, cpus, pids },
          agentReserveBytes: AGENT_MEMORY_RESERVE_BYTES,
        }) ?? null
      const paths = diskPaths(dir)
      const withDisk = spec.limits.diskBytes !== undefined
      const state: NamespaceState = {
        dir,
        workspace: withDisk ? paths.workspace : join(dir, 'workspace'),
        etcDir: withDisk ? paths.etc : join(dir, 'etc'),
        disk: withDisk,
        socketDir: join(dir, 'link'),
        linkSecret: spec.linkSecret,
        cgroup,
        rootless: this.rootless,
      }
      // From here on the cgroups, the disk and the chain exist before the runner has a handle.
      recordCreated(dir, this.name, state)
      if (spec.limits.diskBytes !== undefined) {
        const bytes = spec.limits.diskBytes
        const spares = join(this.#stateDir, 'disk-spares')
        const spare = takeSpareDisk(spares, dir, bytes)
        disk = diskFormat(spare ?? prepareDisk(dir, bytes), spare !== null, spareRefill(spares, bytes))
      }
      launch = await this.#launch(state, spec, disk)
      if (disk !== null) {
        diskMade = diskReady(launch.child, disk)
        // Awaited below; a failure elsewhere first must not count as unhandled.
        diskMade.catch(() => {})
        await diskMade
        finishDisk(paths, this.#uid)
      }
      mkdirSync(state.workspace, { recursive: true, mode: 0o700 })
      // Rootless, the runner's own uid is the sandbox uid inside.
      if (!this.rootless) chownSync(state.workspace, this.#uid, this.#uid)
      mkdirSync(state.etcDir, { recursive: true, mode: 0o755 })
      for (const [name, text] of Object.entries(sandboxEtcFiles(this.#uid, GUEST_WORKSPACE)))
        writeFileSync(join(state.etcDir, name), text, { mode: 0o644 })
      this.#launches.set(spec.id, launch)
      return { id: spec.id, workdir: GUEST_WORKSPACE, state }
    } catch (error) {
      // Nothing is handed back, so nothing else would undo what was made here.
      if (launch) {
        endLaunch(launch)
        // A cgroup still holding the dying chain cannot be removed.
        await this.#exits.pending(launch.pid)
      }
      // The report's end means the format's processes are gone: the mount is final.
      await diskMade.catch(() => {})
      if (spec.limits.diskBytes !== undefined) await removeDisk(dir).catch(() => {})
      // A chain that failed before its own disk was mounted never formats the next spare.
      if (disk?.refill) rmSync(disk.refill.tmp, { force: true })
      if (cgroup !== null)
        await this.#host
          .cgroupsOf(cgroup.version)
          .remove(cgroup)
          .catch(() => {})
      throw error
    }
  }

  /** The agent's runtime, located on first use and (as root) on its image, acquired for each start. */
  async #agentRuntime(rootless: boolean): Promise<AgentRuntime> {
    // Rootless, nothing can be loop-mounted: the runtime is bound from its host paths.
    this.#runtime ??= locateAgentRuntime(this.#nodePath, this.#agentEntry).then((runtime) =>
      rootless ? runtime : new RuntimeImage(runtime, this.#runtimeCache),
    )
    this.#runtime.catch(() => {
      this.#runtime = undefined
    })
    const located = await this.#runtime
    return located instanceof RuntimeImage ? located.acquire() : located
  }

  /** Starts the agent: releases the chain `create` started (or starts one, on a restart) with bwrap's options. */
  async startAgent(sandbox: DriverSandbox, spec: SandboxSpec): Promise<DriverSandbox> {
    const state = NamespaceState.parse(sandbox.state)
    const held = this.#launches.get(sandbox.id)
    this.#launches.delete(sandbox.id)
    const launch = held ?? (await this.#launch(state, spec))
    try {
      sendLinkSecret(launch.child, 5, state.linkSecret)
      feedSeccomp(launch.child, launch.seccomp)
      // bwrap reads its options from a pipe (the command stays on its command line).
      feedArgs(launch.child, namespaceBwrapOptions(state, spec, this.#uid, launch))
      release(launch.child)
    } catch (error) {
      endLaunch(launch)
      throw error
    }
    const { pid } = launch
    const startTime = procStat(pid)?.startTime
    return { ...sandbox, state: { ...state, pid, ...(startTime ? { startTime } : {}) } }
  }

  /** Spawns the sandbox's chain, held before bwrap (see namespace-chain.ts). */
  async #launch(state: NamespaceState, spec: SandboxSpec, disk: DiskFormat | null = null): Promise<Launch> {
    const runtime = await this.#agentRuntime(state.rootless)
    // The filter's program is the same for every sandbox: built once (it takes about a millisecond).
    this.#seccomp ??= bwrapSeccomp(6)
    return spawnChain(state, spec, {
      uid: this.#uid,
      runtime,
      seccomp: this.#seccomp,
      disk,
      exits: this.#exits,
    })
  }

  /** Connects to the agent's socket from the host, retrying while the agent is starting. */
  async connect(sandbox: DriverSandbox, timeoutMs: number): Promise<Duplex> {
    const state = NamespaceState.parse(sandbox.state)
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

  /** True while the sandbox's first process (same pid and start time) runs. */
  async isAlive(sandbox: DriverSandbox): Promise<Liveness> {
    const state = NamespaceState.parse(sandbox.state)
    if (!state.pid) return { alive: false, reason: 'the sandbox was never started' }
    const exit = this.#exits.reason(state.pid)
    if (exit) return { alive: false, reason: exit }
    const stat = procStat(state.pid)
    if (
      !stat ||
      stat.state === 'Z' ||
      (state.startTime !== undefined && stat.startTime !== state.startTime)
    ) {
      // A sandbox this runner started has just ended: its exit status says why, once Node reaps
      // it. The child is unref'd, so this wait's own timer holds the event loop until then (and
      // is cleared after): a runner used in process with nothing else open would otherwise exit
      // in the middle of a stop, leaving the delete or hibernation unfinished.
      const pending = this.#exits.pending(state.pid)
      let timer: NodeJS.Timeout | undefined
      const reason = pending
        ? await Promise.race([
            pending,
            new Promise<undefined>((r) => {
              timer = setTimeout(() => r(undefined), 2_000)
            }),
          ]).finally(() => clearTimeout(timer))
        : undefined
      return { alive: false, reason: reason ?? `sandbox process ${state.pid} is no longer running` }
    }
    return { alive: true, reason: null }
  }

  /** What the sandbox's cgroups count: memory now and at peak, CPU time, pids, OOM kills. */
  async usage(sandbox: DriverSandbox): Promise<SandboxUsage | null> {
    const { cgroup } = NamespaceState.parse(sandbox.state)
    return cgroup === null ? null : this.#host.cgroupsOf(cgroup.version).stats(cgroup)
  }

  /** Kills the sandbox's pid namespace and every process in its cgroups; the workspace stays. */
  async stop(sandbox: DriverSandbox): Promise<void> {
    const state = NamespaceState.parse(sandbox.state)
    const deadline = Date.now() + 5_000
    for (;;) {
      const live = state.pid !== undefined && (await this.isAlive(sandbox)).alive
      // The sandbox's pid 1 is bwrap's child; killing it kills its whole pid namespace.
      const targets = [
        ...(live && state.pid ? childrenOf(state.pid) : []),
        ...(state.cgroup === null ? [] : this.#host.cgroupsOf(state.cgroup.version).pids(state.cgroup)),
      ]
      if (!live && targets.length === 0) return
      for (const pid of targets) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // already gone
        }
      }
      if (Date.now() >= deadline) {
        throw new RunnerError(
          'INTERNAL',
          `sandbox ${sandbox.id} still has processes after SIGKILL: ${targets.join(', ')}`,
        )
      }
      await new Promise((r) => setTimeout(r, 10))
    }
  }

  /** The workspace on the host: its folder, or the folder on its disk. */
  hostWorkspace(sandbox: DriverSandbox): string {
    return NamespaceState.parse(sandbox.state).workspace
  }

  /** Stops the sandbox and deletes its folder, socket dir and cgroups. */
  async destroy(sandbox: DriverSandbox): Promise<void> {
    const held = this.#launches.get(sandbox.id)
    this.#launches.delete(sandbox.id)
    if (held) endLaunch(held)
    await this.stop(sandbox)
    const state = NamespaceState.parse(sandbox.state)
    await releaseWorkspaceOverlay(state.workspace)
    if (state.cgroup !== null) await this.#host.cgroupsOf(state.cgroup.version).remove(state.cgroup)
    if (state.disk) await removeDisk(state.dir)
    // Rootless, sandbox code owns its files on the host and may have made dirs the runner cannot list.
    if (state.rootless) removeOwnTree(state.dir)
    else rmSync(state.dir, { recursive: true, force: true })
  }
}
