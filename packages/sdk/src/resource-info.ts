// The records the runner reports about its resources, as plain interfaces. They mirror the
// protocol's zod-inferred types field for field (a type test holds them equal), and exist so
// the published `.d.ts` is readable and needs no zod.

/**
 * Resource limits of a sandbox; drivers without isolation record them but cannot enforce them.
 *
 * @example
 * ```ts
 * const sb = await Sandbox.create({ url, apiKey, limits: { memoryBytes: 512 * 2 ** 20, cpus: 1, pids: 256 } })
 * ```
 */
export interface SandboxLimits {
  /** Memory limit in bytes. */
  memoryBytes?: number | undefined
  /** CPU limit in cores (0.5 = half a core). */
  cpus?: number | undefined
  /** Process count limit. */
  pids?: number | undefined
  /** Workspace size limit in bytes. */
  diskBytes?: number | undefined
}

/**
 * A sandbox as the runner reports it.
 *
 * @example
 * ```ts
 * const dead = (await Sandbox.list({ url, apiKey })).filter((s) => s.status === 'dead')
 * ```
 */
export interface SandboxInfo {
  /** Sandbox id (`sb_...`). */
  id: string
  /**
   * `running` while its agent answers; `unreachable` while its agent lives but does not answer
   * (the runner keeps retrying, see `deadReason`); `hibernated` while it is stored as a snapshot
   * with nothing running (the next request wakes it); `dead` when the agent died (see `deadReason`).
   */
  status: 'starting' | 'running' | 'unreachable' | 'hibernated' | 'dead' | 'destroyed'
  /** Driver that created it. */
  driver: string
  /** What isolates it from the host. */
  isolation: 'none' | 'namespace' | 'vm'
  /** One sentence on what the driver does and does not isolate. */
  description: string
  /** The workspace directory as its shells see it. */
  workdir: string
  /** Resource limits. */
  limits: SandboxLimits
  /** Free-form labels. */
  metadata: Record<string, string>
  /** When it was created (ms since the epoch). */
  createdAt: number
  /** Why the agent is gone (`dead`) or does not answer (`unreachable`); null otherwise. */
  deadReason: string | null
  /** Idle time after which the runner destroys it; null: never (absent from older runners). */
  idleTimeoutMs?: number | null
  /** Idle time after which the runner hibernates it; null: never (absent from older runners). */
  hibernateAfterMs?: number | null
  /** Idle time after which the runner deletes one of its sessions; null: never (absent from older runners). */
  sessionIdleTimeoutMs?: number | null
  /** When its idle time started (ms since the epoch): its last request, client or command (absent from older runners). */
  lastActivityAt?: number
  /** Until when a keep-alive holds it awake (ms since the epoch); null when none does (absent from older runners). */
  keepAliveUntil?: number | null
  /** The snapshot it was forked from (`fromSnapshot`), and how the restore went; absent otherwise. */
  restoredFrom?: {
    /** The snapshot. */
    snapshotId: string
    /** Each restored session, with the pieces of its shell state bash refused (usually none). */
    sessions: Array<{ id: string; problems: string[] }>
    /** Background processes started again: processes restart, they do not continue. */
    processesRestarted: number
  }
  /** What it uses now, as its driver measures it; null (or absent from older runners) when the driver does not. */
  usage?: SandboxUsage | null
}

/**
 * A stored snapshot of a sandbox: its workspace, every session's shell state and its settings.
 *
 * @example
 * ```ts
 * const snap = await sb.snapshot({ name: 'before-migration' })
 * console.log(snap.id, snap.sessions, snap.storedBytes)
 * ```
 */
export interface SnapshotInfo {
  /** Snapshot id (`snap_...`). */
  id: string
  /** The name given when it was taken, if any. */
  name: string | null
  /** The sandbox it was taken of. */
  sandboxId: string
  /** When it was taken (ms since the epoch). */
  createdAt: number
  /** Version of the snapshot format. */
  formatVersion: number
  /** Ids of the sessions it holds. */
  sessions: string[]
  /** Files, directories and links in its workspace. */
  entries: number
  /** Bytes of the workspace's files before compression. */
  workspaceBytes: number
  /** Bytes it added to the runner's store (what it shares with earlier snapshots is not counted). */
  storedBytes: number
  /** Background processes it lists; `Sandbox.create({ fromSnapshot, restartProcesses: true })` starts the running ones again. */
  processes: Array<{ command: string; cwd: string; running: boolean }>
}

/** What a sandbox uses, as its driver's cgroups count it. */
export interface SandboxUsage {
  /** Memory in use, in bytes. */
  memoryBytes: number
  /** Most memory used at once, in bytes; null where the host does not record it. */
  memoryPeakBytes: number | null
  /** CPU time used, in seconds. */
  cpuSeconds: number
  /** Processes and threads now. */
  pids: number
  /** Commands the memory limit killed. */
  oomKills: number
}

/**
 * A sandbox-scoped access token.
 *
 * @example
 * ```ts
 * const { token, expiresAt } = await sb.createAccessToken({ ttlMs: 60_000 })
 * ```
 */
export interface AccessToken {
  /** The bearer secret; usable only for this sandbox. Shown once. */
  token: string
  /** The sandbox it grants access to. */
  sandboxId: string
  /** When it stops working (ms since the epoch). */
  expiresAt: number
}

/**
 * A TCP port a server listens on inside the sandbox.
 *
 * @example
 * ```ts
 * const ports = await sb.ports() // [{ port: 3000, address: '127.0.0.1', family: 'ipv4' }]
 * ```
 */
export interface ListeningPort {
  /** Port number. */
  port: number
  /** Local address it is bound to (`127.0.0.1`, `0.0.0.0`, `::`, ...). */
  address: string
  /** Address family. */
  family: 'ipv4' | 'ipv6'
}

/**
 * A change in the sandbox's listening ports.
 *
 * @example
 * ```ts
 * for await (const ev of sb.watchPorts()) if (ev.type === 'port_opened') console.log(ev.port)
 * ```
 */
export interface PortEvent {
  /** `port_opened` when a server starts listening on the port, `port_closed` when none does any more. */
  type: 'port_opened' | 'port_closed'
  /** Port number. */
  port: number
  /** The addresses it listens on (empty for `port_closed`). */
  addresses: string[]
}

/**
 * A port exposed through the runner, with the URL a browser opens.
 *
 * @example
 * ```ts
 * const { url } = await sb.exposePort(3000)
 * ```
 */
export interface ExposedPort {
  /** Sandbox id. */
  sandboxId: string
  /** Port number. */
  port: number
  /** Path on the runner, with the port token in its query (a browser trades it for a cookie). */
  path: string
  /** Host-based URL when the runner has a preview domain, else null. */
  previewUrl: string | null
  /** A token for this one port of this one sandbox; shown once. */
  token: string
  /** When the token stops working (ms since the epoch). */
  expiresAt: number
  /** Whether the port is reachable without a credential. */
  public: boolean
}

/**
 * Why and how a shell closed.
 *
 * @example
 * ```ts
 * const { closed } = await (await sb.getSession('build')).refresh()
 * if (closed) console.log(`bash ended: ${closed.reason}`)
 * ```
 */
export interface ShellClosedInfo {
  /** bash's exit status, when it exited. */
  code: number | null
  /** The signal that killed bash, when one did. */
  signal: string | null
  /** A sentence for humans: `exit 7`, `killed by SIGKILL`. */
  reason: string
}

/**
 * A session as the runner reports it.
 *
 * @example
 * ```ts
 * const busy = (await sb.listSessions()).filter((s) => s.running !== null || s.queued > 0)
 * ```
 */
export interface SessionInfo {
  /** Session id. */
  id: string
  /** `open` while bash runs; `closed` after it ended. */
  status: 'open' | 'closed'
  /** The directory the session started in. */
  cwd: string
  /** Default timeout of this session's runs. */
  commandTimeoutMs: number
  /** Whether it started from an empty environment. */
  cleanEnv: boolean
  /** bash's process id inside the sandbox, while open. */
  pid: number | null
  /** When the session was created (ms since the epoch). */
  createdAt: number
  /** End of the session's output log: the offset the next output byte gets. */
  offset: number
  /** The run in progress, if any. */
  running: string | null
  /** Runs waiting behind it. */
  queued: number
  /** How the shell closed, once it has. */
  closed: ShellClosedInfo | null
}

/**
 * One command in a session's history.
 *
 * @example
 * ```ts
 * for (const entry of await sh.history({ prefix: 'git ' })) console.log(entry.index, entry.command, entry.exitCode)
 * ```
 */
export interface HistoryEntry {
  /** Position in the history, from 0; stable for the session's life. */
  index: number
  /** The command text as submitted. */
  command: string
  /** When it started (ms since the epoch). */
  startedAt: number
  /** Its exit code, or null while it runs or when the shell closed under it. */
  exitCode: number | null
  /** Its duration, or null while it runs. */
  durationMs: number | null
}

/**
 * A background process as the runner reports it.
 *
 * @example
 * ```ts
 * const running = (await sb.listProcesses()).filter((p) => p.info.status === 'running')
 * ```
 */
export interface ProcessInfo {
  /** Process id within the sandbox (`proc_...`, not the OS pid). */
  id: string
  /** OS process id inside the sandbox. */
  pid: number
  /** The command line. */
  command: string
  /** `running`, `exited` on its own, or `killed` by a kill call. */
  status: 'running' | 'exited' | 'killed'
  /** Exit code once it exited; 128+n when a signal ended it. */
  exitCode: number | null
  /** The ending signal's name, when a signal ended it. */
  signal: string | null
  /** When it started (ms since the epoch). */
  startedAt: number
  /** When it ended. */
  endedAt: number | null
  /** End of its output log. */
  offset: number
}

/**
 * What a directory entry or stat reports.
 *
 * @example
 * ```ts
 * const dirs = (await sb.files.list('/workspace')).filter((f) => f.type === 'directory')
 * ```
 */
export interface FileInfo {
  /** Absolute sandbox path (`/workspace/...`). */
  path: string
  /** Last path component. */
  name: string
  /** Entry type; symlinks are reported, never followed out of the sandbox. */
  type: 'file' | 'directory' | 'symlink' | 'other'
  /** Size in bytes. */
  size: number
  /** Permission bits. */
  mode: number
  /** Last modification time (ms since the epoch). */
  mtimeMs: number
}
