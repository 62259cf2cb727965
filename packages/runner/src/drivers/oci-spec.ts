// The OCI runtime spec (config.json) of a gVisor sandbox. The sandbox sees a read-only root
// (a per-sandbox skeleton dir, or an image dir) with: the host's system dirs read-only (when
// built from the host), a subset of the host's /etc plus generated files, fresh /proc, /tmp and
// /dev/shm sized inside its memory, its workspace read-write at /workspace, its link dir at
// /run/conch and the agent's runtime read-only under /opt/conch. Its first process runs as root
// of the sandbox with a few capabilities and no_new_privs; it has no network namespace peer, and
// its limits are the cgroup resources of the whole sandbox plus RLIMIT_NPROC for the sandbox
// user's processes.
import { lstatSync, readlinkSync } from 'node:fs'
import { type AgentRuntime, GUEST_RUNTIME_DIR } from './agent-runtime.ts'
import { ETC_ENTRIES, SYSTEM_ENTRIES } from './host-system-layout.ts'

/** The OCI runtime spec version written. */
const OCI_VERSION = '1.0.2'

/** The CFS period used for CPU quotas, in microseconds. */
const CFS_PERIOD_US = 100_000

/**
 * Capabilities of the sandbox's first process (the agent): start shells as the sandbox user,
 * signal their processes, and manage the workspace files they own. Shells lose them all when
 * they switch to the sandbox user.
 */
const AGENT_CAPS = ['CAP_SETUID', 'CAP_SETGID', 'CAP_KILL', 'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER']

/** One OCI mount. */
export interface OciMount {
  /** Path inside the sandbox. */
  destination: string
  /** `bind`, `tmpfs` or `proc`. */
  type: string
  /** Host path for binds, the fs name otherwise. */
  source: string
  /** Mount options. */
  options: string[]
}

/** The parts of an OCI spec this driver writes. */
export interface OciSpec {
  /** Spec version. */
  ociVersion: string
  /** The first process. */
  process: {
    user: { uid: number; gid: number }
    args: string[]
    env: string[]
    cwd: string
    noNewPrivileges: boolean
    capabilities: Record<'bounding' | 'effective' | 'permitted', string[]>
    rlimits: { type: string; hard: number; soft: number }[]
  }
  /** The root filesystem. */
  root: { path: string; readonly: boolean }
  /** Hostname inside. */
  hostname: string
  /** Mounts, in order. */
  mounts: OciMount[]
  /** Namespaces, cgroup and limits. */
  linux: {
    namespaces: { type: string }[]
    cgroupsPath: string
    resources: {
      memory?: { limit: number }
      pids: { limit: number }
      cpu?: { quota: number; period: number }
    }
  }
}

/** Everything the spec depends on. */
export interface OciLayout {
  /** The root dir on the host (read-only inside). */
  rootfs: string
  /** Bind the host's system dirs and /etc subset (false when `rootfs` is a full image). */
  hostSystem: boolean
  /** Hostname inside. */
  hostname: string
  /** The workspace on the host (bound at /workspace). */
  workspace: string
  /** The link dir on the host (bound at /run/conch, where the agent makes its socket). */
  linkDir: string
  /** Generated /etc files on the host, by name. */
  etcFiles: Record<string, string>
  /** A host dir bound read-only at /opt/conch under the runtime's mounts (it holds the runtime's symlinks). */
  optDir: string
  /** Single host files bound at guest paths (the preload library, read-only; its OOM counter, writable). */
  extraFiles: { host: string; guest: string; writable?: boolean }[]
  /** The agent's files. */
  runtime: AgentRuntime
  /** Size of /tmp in bytes; unbounded when absent. */
  tmpBytes?: number
  /** Size of /dev/shm in bytes; unbounded when absent. */
  shmBytes?: number
  /** Memory of the whole sandbox (sentry included), in bytes. */
  memoryBytes?: number
  /** Processes the sandbox user may have at once (RLIMIT_NPROC inside). */
  userProcesses: number
  /** Host tasks the whole sandbox may have (sentry threads and stubs): the host's backstop. */
  hostPids: number
  /** CPUs, as a fraction of one. */
  cpus?: number
  /** The cgroup path (under each controller) of the sandbox. */
  cgroupsPath: string
  /** The complete environment of the first process. */
  env: Record<string, string>
  /** The first process's argv. */
  args: string[]
}

/** What a host path needs inside: a read-only bind, a symlink to re-create, or nothing when missing. */
export type HostEntry = { kind: 'bind' } | { kind: 'symlink'; target: string } | { kind: 'missing' }

/** How `path` exists on the host. */
export function hostEntry(path: string): HostEntry {
  try {
    const stat = lstatSync(path)
    return stat.isSymbolicLink() ? { kind: 'symlink', target: readlinkSync(path) } : { kind: 'bind' }
  } catch {
    return { kind: 'missing' }
  }
}

/** The host paths bound read-only from the host's system: top-level dirs and the /etc subset. */
export function hostSystemBinds(): string[] {
  return [...SYSTEM_ENTRIES, ...ETC_ENTRIES.map((name) => `/etc/${name}`)].filter(
    (path) => hostEntry(path).kind === 'bind',
  )
}

/** The host's system symlinks the skeleton root re-creates, as [target, path]. */
export function hostSystemSymlinks(): [string, string][] {
  const out: [string, string][] = []
  for (const path of [...SYSTEM_ENTRIES, ...ETC_ENTRIES.map((name) => `/etc/${name}`)]) {
    const entry = hostEntry(path)
    if (entry.kind === 'symlink') out.push([entry.target, path])
  }
  return out
}

function bind(source: string, destination: string, writable: boolean): OciMount {
  return { destination, type: 'bind', source, options: ['rbind', writable ? 'rw' : 'ro', 'nosuid', 'nodev'] }
}

function tmpfs(destination: string, bytes: number | undefined): OciMount {
  const size = bytes === undefined ? [] : [`size=${bytes}`]
  return { destination, type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777', ...size] }
}

/** The OCI spec of a gVisor sandbox. */
export function ociSpec(layout: OciLayout): OciSpec {
  const mounts: OciMount[] = []
  if (layout.hostSystem) for (const path of hostSystemBinds()) mounts.push(bind(path, path, false))
  for (const [name, host] of Object.entries(layout.etcFiles)) mounts.push(bind(host, `/etc/${name}`, false))
  mounts.push({ destination: '/proc', type: 'proc', source: 'proc', options: [] })
  mounts.push(tmpfs('/tmp', layout.tmpBytes), tmpfs('/dev/shm', layout.shmBytes))
  mounts.push(bind(layout.optDir, GUEST_RUNTIME_DIR, false))
  for (const m of layout.runtime.mounts) mounts.push(bind(m.host, m.guest, false))
  for (const f of layout.extraFiles) mounts.push(bind(f.host, f.guest, f.writable ?? false))
  mounts.push(bind(layout.workspace, '/workspace', true), bind(layout.linkDir, '/run/conch', true))
  const caps = [...AGENT_CAPS]
  return {
    ociVersion: OCI_VERSION,
    process: {
      user: { uid: 0, gid: 0 },
      args: layout.args,
      env: Object.entries(layout.env).map(([name, value]) => `${name}=${value}`),
      cwd: '/workspace',
      noNewPrivileges: true,
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      rlimits: [{ type: 'RLIMIT_NPROC', hard: layout.userProcesses, soft: layout.userProcesses }],
    },
    root: { path: layout.rootfs, readonly: true },
    hostname: layout.hostname,
    mounts,
    linux: {
      namespaces: ['pid', 'ipc', 'uts', 'mount', 'network'].map((type) => ({ type })),
      cgroupsPath: layout.cgroupsPath,
      resources: {
        ...(layout.memoryBytes === undefined ? {} : { memory: { limit: layout.memoryBytes } }),
        pids: { limit: layout.hostPids },
        ...(layout.cpus === undefined
          ? {}
          : {
              cpu: {
                quota: Math.max(1_000, Math.round(layout.cpus * CFS_PERIOD_US)),
                period: CFS_PERIOD_US,
              },
            }),
      },
    },
  }
}
