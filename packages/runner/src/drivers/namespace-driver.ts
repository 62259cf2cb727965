// The namespace driver: each sandbox is a bubblewrap sandbox on the host, Linux only, run by a
// root runner. Its agent runs as an unprivileged uid (default 1000, the same number on the host)
// with no capabilities and no_new_privs, in new user, pid, mount, ipc, uts, net (loopback only)
// and cgroup namespaces, with an environment that is exactly the sandbox's own. The file layout
// is in bwrap-args.ts, the agent's files in agent-runtime.ts and runtime-image.ts, limits in
// cgroups.ts (v1 or v2, whichever the host has), the workspace disk in workspace-disk.ts.
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
import { spawn } from 'node:child_process'
import { chownSync, closeSync, mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import { agentCommand, DEFAULT_SANDBOX_LIMITS, type SandboxLimits, type SandboxUsage } from '@conch/protocol'
import { z } from 'zod'
import { RunnerError } from '../runner-error.ts'
import { releaseWorkspaceOverlay } from '../snapshots/workspace-overlay.ts'
import { bindAgentSocket, ensurePrivateDir, sendLinkSecret } from './agent-endpoint.ts'
import { type AgentRuntime, locateAgentRuntime } from './agent-runtime.ts'
import { connectToAgent } from './agent-socket.ts'
import { AGENT_CAPS, bwrapArgs } from './bwrap-args.ts'
import { type Cgroups, SandboxCgroup } from './cgroups.ts'
import { hostCgroups } from './host-cgroups.ts'
import { childrenOf, procStat } from './proc-stat.ts'
import {
  type RootlessLimits,
  rootlessDefaults,
  rootlessLimits,
  rootlessLimitsProblem,
  rootlessUnenforced,
  runsRootless,
  userNamespaceProblem,
} from './rootless-host.ts'
import { removeOwnTree } from './rootless-workspace.ts'
import { DEFAULT_RUNTIME_CACHE, mountRuntimeImage } from './runtime-image.ts'
import type { DriverSandbox, Liveness, SandboxDriver, SandboxSpec } from './sandbox-driver.ts'
import { SANDBOX_HOSTNAME, sandboxEtcFiles } from './sandbox-etc-files.ts'
import {
  ARGS_FD,
  chainArgs,
  type DiskFormat,
  diskReady,
  endLaunch,
  exitReason,
  feedArgs,
  findBinary,
  type Launch,
  release,
  SYSTEM_BIN_DIRS,
  spawned,
} from './sandbox-launch.ts'
import { bwrapSeccomp, feedSeccomp } from './seccomp-filter.ts'
import { AGENT_MEMORY_RESERVE_BYTES, GUEST_WORK_CGROUP } from './work-cgroup.ts'
import { diskFormat, diskPaths, diskProblem, finishDisk, prepareDisk, removeDisk } from './workspace-disk.ts'

/** The workspace as the sandbox's shells see it. */
const GUEST_WORKSPACE = '/workspace'

/** The namespace driver's handle state. */
const NamespaceState = z.object({
  /** Folder holding the workspace, generated /etc files and the agent log. */
  dir: z.string(),
  /** The workspace on the host. */
  workspace: z.string(),
  /** The generated /etc files on the host. */
  etcDir: z.string(),
  /** Whether the workspace is on the sandbox's own loop-mounted disk (see workspace-disk.ts). */
  disk: z.boolean(),
  /** The folder (0700, the runner's, never mounted in the sandbox) holding the agent's socket. */
  socketDir: z.string(),
  /** The sandbox's link secret. */
  linkSecret: z.string(),
  /** The sandbox's cgroups (v1 or v2), with the `work` group its commands run in; null rootless without a delegated v2 subtree. */
  cgroup: SandboxCgroup.nullable(),
  /** Whether a runner that is not root made it (see rootless-host.ts). */
  rootless: z.boolean().default(false),
  /** Pid of the sandbox's first process (bwrap), once started. */
  pid: z.number().int().positive().optional(),
  /** Its start time from /proc/<pid>/stat, so a recycled pid is not mistaken for it. */
  startTime: z.string().optional(),
})
type NamespaceState = z.infer<typeof NamespaceState>

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

/** /tmp and /dev/shm live in memory: their sizes keep inside the sandbox's memory budget. */
function tmpSizes(state: NamespaceState, spec: SandboxSpec): { tmpBytes?: number; shmBytes?: number } {
  // Rootless without a memory limit, they are still sized as for the default.
  const memory = spec.limits.memoryBytes ?? (state.rootless ? DEFAULT_SANDBOX_LIMITS.memoryBytes : undefined)
  return memory === undefined ? {} : { tmpBytes: Math.floor(memory / 2), shmBytes: Math.floor(memory / 4) }
}

/** The work cgroup's files bound into the sandbox for the agent. */
function workBinds(state: NamespaceState): { host: string; guest: string; writable: boolean }[] {
  const work = state.cgroup?.work ?? null
  if (work === null) return []
  return [
    { host: work.procs, guest: GUEST_WORK_CGROUP.procs, writable: true },
    { host: work.oomEvents, guest: GUEST_WORK_CGROUP.oomEvents, writable: false },
    ...(work.pidsProcs === undefined
      ? []
      : [{ host: work.pidsProcs, guest: GUEST_WORK_CGROUP.pidsProcs, writable: true }]),
  ]
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
  readonly #cgroupsGiven: Cgroups | undefined
  #cgroups: Cgroups | undefined
  readonly #exits = new Map<number, string>()
  /** Exit reasons still to come from sandboxes this runner process started. */
  readonly #pendingExits = new Map<number, Promise<string>>()
  readonly #runtimeCache: string
  #runtime: Promise<AgentRuntime> | undefined
  readonly #rootlessGiven: RootlessLimits | undefined
  #rootlessLimits: RootlessLimits | undefined
  /** bwrap's seccomp filter, built on first use. */
  #seccomp: ReturnType<typeof bwrapSeccomp> | undefined
  /** Each created sandbox's chain, held before bwrap until `startAgent` releases it. */
  readonly #launches = new Map<string, Launch>()

  /** Creates the driver; nothing is checked or started until `create`. */
  constructor(options: NamespaceDriverOptions) {
    this.#stateDir = options.stateDir
    this.#uid = options.uid ?? 1000
    this.#agentEntry = options.agentEntry
    this.#nodePath = options.nodePath ?? process.execPath
    this.#cgroupsGiven = options.cgroups
    this.#runtimeCache = options.runtimeCacheDir ?? DEFAULT_RUNTIME_CACHE
    this.rootless = options.rootless ?? runsRootless()
    this.#rootlessGiven = options.rootlessLimits
  }

  /** What users are told on every sandbox: what isolates it and which limits hold on this host. */
  get description(): string {
    const common =
      'own pid/mount/ipc/uts/user namespaces, no network but loopback, read-only system dirs, and a seccomp filter against the riskiest syscalls; it shares the host kernel, so a kernel bug the filter does not block can escape it'
    if (!this.rootless) {
      return `namespace driver: a bubblewrap sandbox as an unprivileged uid with no capabilities, ${common}; only its workspace is writable (its own disk), with cgroup limits on pids, memory and CPU`
    }
    const limits = this.#limitsHere()
    return `namespace driver, rootless: a bubblewrap sandbox in an unprivileged user namespace with no capabilities, ${common}; its agent runs as the same user as its commands, so they can signal or trace it (ending only their own sandbox); its workspace is a directory on the runner's disk; ${limits.cgroups === null ? 'pids are limited (RLIMIT_NPROC) but ' : 'pids, memory and CPU are limited (delegated cgroup v2) but '}${rootlessUnenforced(limits)} are NOT enforced`
  }

  /** Rootless: the limits this host allows, detected on first use. */
  #limitsHere(): RootlessLimits {
    this.#rootlessLimits ??= this.#rootlessGiven ?? rootlessLimits()
    return this.#rootlessLimits
  }

  /** The runner's default limits that this driver enforces here: all as root, a subset rootless. */
  enforceableDefaults(defaults: SandboxLimits): SandboxLimits {
    return this.rootless ? rootlessDefaults(defaults, this.#limitsHere()) : defaults
  }

  /** For the startup log: the limits this driver cannot enforce here; null when it enforces all. */
  hostWarning(): string | null {
    if (!this.rootless) return null
    const limits = this.#limitsHere()
    return `the namespace driver runs rootless: ${rootlessUnenforced(limits)} are not enforced (sandboxes get only the enforceable defaults, and a create request that sets the others is refused)${limits.missing === null ? '' : `; for memory and CPU limits: ${limits.missing}`}`
  }

  /** Why this host cannot run namespace sandboxes with these limits, or null when it can. */
  problem(spec: Pick<SandboxSpec, 'limits'> = { limits: {} }): string | null {
    if (process.platform !== 'linux') return 'the namespace driver needs Linux'
    for (const name of this.rootless ? ['bwrap', 'sh'] : ['bwrap', 'unshare', 'setpriv', 'sleep', 'sh']) {
      if (!findBinary(name)) {
        return `${name} is not installed (looked in ${SYSTEM_BIN_DIRS.join(', ')}); install bubblewrap and util-linux`
      }
    }
    if (this.rootless) {
      const userns = userNamespaceProblem(findBinary('bwrap')!, findBinary('sh')!)
      if (userns) return userns
    }
    return this.limitsProblem(spec.limits)
  }

  /** The host's cgroups, detected on first use; throws with what is missing when there are none. */
  #hostCgroups(): Cgroups {
    this.#cgroups ??= this.#cgroupsGiven ?? hostCgroups()
    return this.#cgroups
  }

  /** Why these limits cannot be enforced here (no usable cgroups, a missing controller, no loop devices), or null. */
  limitsProblem(limits: SandboxLimits): string | null {
    if (this.rootless) return rootlessLimitsProblem(limits, this.#limitsHere())
    let cgroups: Cgroups
    try {
      cgroups = this.#hostCgroups()
    } catch (error) {
      return error instanceof Error ? error.message : String(error)
    }
    return (
      cgroups.problem({ memoryBytes: limits.memoryBytes, cpus: limits.cpus, pids: limits.pids }) ??
      (limits.diskBytes === undefined ? null : diskProblem())
    )
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
    const dir = join(this.#stateDir, 'sandboxes', spec.id)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    ensurePrivateDir(join(dir, 'link'))
    // The chain formats and mounts the disk (see `chainArgs`): no runner spawn per tool.
    let disk: DiskFormat | null = null
    let diskMade: Promise<void> = Promise.resolve()
    let cgroup: SandboxCgroup | null = null
    let launch: Launch | undefined
    try {
      const { memoryBytes, cpus, pids } = spec.limits
      const cgroups = this.rootless ? this.#limitsHere().cgroups : this.#hostCgroups()
      cgroup =
        cgroups?.create({
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
      if (spec.limits.diskBytes !== undefined) disk = diskFormat(prepareDisk(dir, spec.limits.diskBytes))
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
        await this.#pendingExits.get(launch.pid)
      }
      // The report's end means the format's processes are gone: the mount is final.
      await diskMade.catch(() => {})
      if (spec.limits.diskBytes !== undefined) await removeDisk(dir).catch(() => {})
      if (cgroup !== null)
        await this.#cgroupsOf(cgroup.version)
          .remove(cgroup)
          .catch(() => {})
      throw error
    }
  }

  /** The agent's runtime, located (and as root put on its image) on first use. */
  #agentRuntime(rootless: boolean): Promise<AgentRuntime> {
    // Rootless, nothing can be loop-mounted: the runtime is bound from its host paths.
    this.#runtime ??= locateAgentRuntime(this.#nodePath, this.#agentEntry).then((runtime) =>
      rootless ? runtime : mountRuntimeImage(runtime, this.#runtimeCache),
    )
    this.#runtime.catch(() => {
      this.#runtime = undefined
    })
    return this.#runtime
  }

  /** Starts the agent: releases the chain `create` started (or starts one, on a restart) with bwrap's options. */
  async startAgent(sandbox: DriverSandbox, spec: SandboxSpec): Promise<DriverSandbox> {
    const state = NamespaceState.parse(sandbox.state)
    const held = this.#launches.get(sandbox.id)
    this.#launches.delete(sandbox.id)
    const launch = held ?? (await this.#launch(state, spec))
    try {
      const args = bwrapArgs({
        usernsFd: state.rootless ? null : 3,
        agentUid: state.rootless ? this.#uid : 0,
        agentCaps: state.rootless ? [] : AGENT_CAPS,
        // A cgroup namespace rooted at the agent's v2 leaf would hide `work` from the agent.
        unshareCgroup: state.cgroup === null || state.cgroup.version === 1,
        hostname: SANDBOX_HOSTNAME,
        workspace: state.workspace,
        etcFiles: Object.fromEntries(
          Object.keys(sandboxEtcFiles(this.#uid, GUEST_WORKSPACE)).map((n) => [n, join(state.etcDir, n)]),
        ),
        runtime: launch.runtime,
        ...tmpSizes(state, spec),
        extraBinds: workBinds(state),
        env: {
          PATH: '/usr/local/bin:/usr/bin:/bin',
          HOME: GUEST_WORKSPACE,
          LANG: 'C.UTF-8',
          TERM: 'dumb',
          ...spec.env,
        },
        seccompArgs: launch.seccomp.args,
        // The agent must not inherit the namespace fd (3), the filter's (6) or the args' (7); it keeps 4 (socket) and 5 (secret).
        command: launch.command,
      })
      sendLinkSecret(launch.child, 5, state.linkSecret)
      feedSeccomp(launch.child, launch.seccomp)
      // bwrap reads its options from a pipe (the command stays on its command line).
      feedArgs(launch.child, args.slice(0, args.length - launch.command.length - 1))
      release(launch.child)
    } catch (error) {
      endLaunch(launch)
      throw error
    }
    const { pid } = launch
    const startTime = procStat(pid)?.startTime
    return { ...sandbox, state: { ...state, pid, ...(startTime ? { startTime } : {}) } }
  }

  /**
   * Spawns the sandbox's chain detached, logging to `agent.log`: `sh` (root) joins the
   * sandbox's cgroups and then waits for `go` on a pipe (`startAgent` writes it after bwrap's
   * options); only then does it exec `setpriv` (to the sandbox uid) and bwrap. Anything else on
   * that pipe, or its end (a runner that died), ends the chain before bwrap starts.
   */
  async #launch(state: NamespaceState, spec: SandboxSpec, disk: DiskFormat | null = null): Promise<Launch> {
    const runtime = await this.#agentRuntime(state.rootless)
    let endpoint: Awaited<ReturnType<typeof bindAgentSocket>> | undefined
    let logFd: number | undefined
    try {
      // The filter's program is the same for every sandbox: built once (it takes about a millisecond).
      this.#seccomp ??= bwrapSeccomp(6)
      const seccomp = this.#seccomp
      endpoint = await bindAgentSocket(state.socketDir)
      logFd = openSync(join(state.dir, 'agent.log'), 'a', 0o600)
      const work = state.cgroup?.work ?? null
      const agent = agentCommand(
        runtime.node,
        runtime.entry,
        {
          listenFd: 4,
          secretFd: 5,
          // Rootless, the agent already is the sandbox uid, the only one its namespace maps.
          ...(state.rootless ? {} : { sandboxUid: this.#uid, sandboxGid: this.#uid }),
          ...(work === null
            ? {}
            : { workCgroup: GUEST_WORK_CGROUP.procs, oomEvents: GUEST_WORK_CGROUP.oomEvents }),
          ...(work?.pidsProcs === undefined ? {} : { workPidsCgroup: GUEST_WORK_CGROUP.pidsProcs }),
          root: GUEST_WORKSPACE,
          scrollbackBytes: spec.scrollbackBytes,
          maxSessions: spec.maxSessions,
        },
        runtime.compileCache,
      )
      // Rootless without cgroups, RLIMIT_NPROC set inside the user namespace bounds its tasks.
      const nproc = state.rootless && state.cgroup === null && spec.limits.pids !== undefined
      const command = [
        '/bin/sh',
        '-c',
        `${nproc ? `ulimit -p ${spec.limits.pids} && ` : ''}exec "$@" 3<&- 6<&- ${ARGS_FD}<&-`,
        'sh',
        ...agent,
      ]
      const id = String(this.#uid)
      const toUid = state.rootless
        ? []
        : [findBinary('setpriv')!, `--reuid=${id}`, `--regid=${id}`, '--clear-groups', '--']
      const child = spawn(
        findBinary('sh')!,
        chainArgs({
          disk,
          join: state.cgroup?.join ?? [],
          // Rootless, bwrap makes the user namespace itself.
          usernsUid: state.rootless ? null : this.#uid,
          command: [
            ...toUid,
            findBinary('bwrap')!,
            // The options come through a pipe: the sandbox's pid 1 is bwrap, and its argv
            // (readable inside at /proc/1/cmdline) would otherwise name the host paths it binds.
            // The command names only paths inside.
            '--args',
            String(ARGS_FD),
            '--',
            ...command,
          ],
        }),
        {
          detached: true,
          // fd 3 is the user namespace the chain opens itself.
          stdio: [
            'ignore',
            logFd,
            logFd,
            'ignore',
            endpoint.fd,
            'pipe',
            'pipe',
            'pipe',
            'pipe',
            ...(disk === null ? [] : ['pipe' as const]),
          ],
          env: {},
          cwd: '/',
        },
      )
      const pid = await spawned(child)
      this.#pendingExits.set(
        pid,
        new Promise((resolve) =>
          child.once('exit', (code, signal) => {
            const reason = exitReason(code, signal)
            this.#exits.set(pid, reason)
            this.#pendingExits.delete(pid)
            resolve(reason)
          }),
        ),
      )
      child.unref()
      return { child, pid, command, runtime, seccomp }
    } finally {
      endpoint?.close()
      if (logFd !== undefined) closeSync(logFd)
    }
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
    const exit = this.#exits.get(state.pid)
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
      const pending = this.#pendingExits.get(state.pid)
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
    return cgroup === null ? null : this.#cgroupsOf(cgroup.version).stats(cgroup)
  }

  /** The cgroups that made a sandbox's groups: the delegated v2 subtree rootless, else the host's. */
  #cgroupsOf(version: 1 | 2): Cgroups {
    const rootless = this.rootless ? this.#limitsHere().cgroups : null
    return rootless?.version === version ? rootless : this.#hostCgroups()
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
        ...(state.cgroup === null ? [] : this.#cgroupsOf(state.cgroup.version).pids(state.cgroup)),
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

  /** Stops the sandbox and deletes its folder, socket dir and cgroups. */
  /** The workspace on the host: its folder, or the folder on its disk. */
  hostWorkspace(sandbox: DriverSandbox): string {
    return NamespaceState.parse(sandbox.state).workspace
  }

  async destroy(sandbox: DriverSandbox): Promise<void> {
    const held = this.#launches.get(sandbox.id)
    this.#launches.delete(sandbox.id)
    if (held) endLaunch(held)
    await this.stop(sandbox)
    const state = NamespaceState.parse(sandbox.state)
    await releaseWorkspaceOverlay(state.workspace)
    if (state.cgroup !== null) await this.#cgroupsOf(state.cgroup.version).remove(state.cgroup)
    if (state.disk) await removeDisk(state.dir)
    // Rootless, sandbox code owns its files on the host and may have made dirs the runner cannot list.
    if (state.rootless) removeOwnTree(state.dir)
    else rmSync(state.dir, { recursive: true, force: true })
  }
}
