// The bubblewrap command line of a namespace sandbox. The sandbox sees a tmpfs root holding:
// the host's system directories read-only (/usr and the top-level links or dirs into it, a
// small subset of /etc plus generated passwd, group, hostname and hosts), fresh /proc, /dev,
// /tmp and /dev/shm, its workspace read-write at /workspace, its socket dir at /run/conch, and
// the agent's runtime read-only under /opt/conch. Nothing else of the host is mounted. The root
// is read-only once built. The environment is cleared and set to exactly `env`.
import { lstatSync, readlinkSync } from 'node:fs'
import { dirname } from 'node:path'
import type { AgentRuntime } from './agent-runtime.ts'
import { ETC_ENTRIES, SYSTEM_ENTRIES } from './host-system-layout.ts'

/**
 * Capabilities the agent keeps inside the sandbox's user namespace (nothing on the host): start
 * shells as the sandbox user, signal their processes, and manage the workspace files they own.
 * Shells lose every capability when they switch to the sandbox user.
 */
export const AGENT_CAPS = [
  'CAP_SETUID',
  'CAP_SETGID',
  'CAP_KILL',
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FOWNER',
]

/** Everything the command line depends on. */
export interface BwrapLayout {
  /** The fd (in bwrap) of the user namespace to join; null: bwrap makes one itself (rootless). */
  usernsFd: number | null
  /** Uid and gid of the sandbox's first process (the agent) inside: 0 as root, the sandbox uid rootless. */
  agentUid: number
  /** Capabilities the agent keeps in the user namespace (AGENT_CAPS as root, none rootless). */
  agentCaps: readonly string[]
  /** Whether the sandbox gets its own cgroup namespace. */
  unshareCgroup: boolean
  /** Hostname inside. */
  hostname: string
  /** The workspace directory on the host (bound at /workspace). */
  workspace: string
  /** Generated /etc files on the host, by name (passwd, group...). */
  etcFiles: Record<string, string>
  /** The agent's files. */
  runtime: AgentRuntime
  /** Size of /tmp in bytes; unbounded when absent. */
  tmpBytes?: number
  /** Size of /dev/shm in bytes; unbounded when absent. */
  shmBytes?: number
  /** Single host files bound at guest paths (the work cgroup's files). */
  extraBinds: { host: string; guest: string; writable: boolean }[]
  /** `--seccomp <fd>`: the filter every process of the sandbox runs under. */
  seccompArgs: string[]
  /** The complete environment of the sandbox's first process. */
  env: Record<string, string>
  /** The command run inside, after the options. */
  command: string[]
}

/** How a host path appears: the same symlink, a read-only bind of it, or nothing when missing. */
function mirror(path: string, guest: string = path): string[] {
  try {
    const stat = lstatSync(path)
    if (stat.isSymbolicLink()) return ['--symlink', readlinkSync(path), guest]
    return ['--ro-bind', path, guest]
  } catch {
    return []
  }
}

/** The bwrap argv (without the bwrap path itself). */
export function bwrapArgs(layout: BwrapLayout): string[] {
  const args = [
    ...(layout.usernsFd === null ? ['--unshare-user'] : ['--userns', String(layout.usernsFd)]),
    '--unshare-pid',
    '--unshare-net',
    '--unshare-ipc',
    '--unshare-uts',
    ...(layout.unshareCgroup ? ['--unshare-cgroup-try'] : []),
    // As root, the agent runs as root of the sandbox's user namespace, so the sandbox user (its
    // shells) can neither ptrace nor signal it. Rootless, only one uid exists inside.
    '--uid',
    String(layout.agentUid),
    '--gid',
    String(layout.agentUid),
    '--hostname',
    layout.hostname,
    '--cap-drop',
    'ALL',
    ...layout.agentCaps.flatMap((cap) => ['--cap-add', cap]),
    '--new-session',
    '--clearenv',
  ]
  for (const [name, value] of Object.entries(layout.env)) args.push('--setenv', name, value)
  for (const entry of SYSTEM_ENTRIES) args.push(...mirror(entry))
  args.push('--perms', '0755', '--dir', '/etc')
  for (const name of ETC_ENTRIES) args.push(...mirror(`/etc/${name}`))
  for (const [name, host] of Object.entries(layout.etcFiles)) args.push('--ro-bind', host, `/etc/${name}`)
  args.push('--proc', '/proc', '--dev', '/dev')
  const size = (bytes: number | undefined): string[] => (bytes === undefined ? [] : ['--size', String(bytes)])
  args.push('--perms', '01777', ...size(layout.shmBytes), '--tmpfs', '/dev/shm')
  args.push('--perms', '01777', ...size(layout.tmpBytes), '--tmpfs', '/tmp')
  for (const m of layout.runtime.mounts) args.push('--ro-bind', m.host, m.guest)
  for (const [target, path] of layout.runtime.symlinks) args.push('--symlink', target, path)
  args.push('--bind', layout.workspace, '/workspace')
  for (const dir of new Set(layout.extraBinds.map((b) => dirname(b.guest))))
    args.push('--perms', '0755', '--dir', dir)
  for (const b of layout.extraBinds) args.push(b.writable ? '--bind' : '--ro-bind', b.host, b.guest)
  args.push('--remount-ro', '/', '--chdir', '/workspace', ...layout.seccompArgs, '--', ...layout.command)
  return args
}
