// The OCI bundle of one gVisor sandbox, written into its folder before each start: the /etc
// files the sandbox gets (generated ones, the preload's), a skeleton root (the host's top-level
// symlinks, when the sandbox is built from the host's system dirs), the runtime's symlinks under
// /opt/conch, the link secret (a root-only file in the link dir, which the agent deletes once
// read), the OOM counter the preload writes, and `config.json` from oci-spec.ts.
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { agentCommand } from '@conch/protocol'
import { agentSocketPath, ensurePrivateDir } from './agent-endpoint.ts'
import { type AgentRuntime, GUEST_RUNTIME_DIR } from './agent-runtime.ts'
import { GUEST_OOM_EVENTS, GUEST_PRELOAD_PATH, GUEST_PROCESS_MEMORY_FILE } from './gvisor-preload.ts'
import { hostSystemSymlinks, ociSpec } from './oci-spec.ts'
import { DEFAULT_SANDBOX_PATH, sandboxBaseEnv } from './sandbox-base-env.ts'
import type { SandboxSpec } from './sandbox-driver.ts'
import { SANDBOX_HOSTNAME, SANDBOX_USER, sandboxEtcFiles } from './sandbox-etc-files.ts'
import { AGENT_MEMORY_RESERVE_BYTES } from './work-cgroup.ts'

/** The workspace as the sandbox's shells see it. */
export const GUEST_WORKSPACE = '/workspace'

/** The link dir as the agent sees it. */
const GUEST_LINK_DIR = '/run/conch'

/** The secret file's name in the link dir. */
const SECRET_NAME = 'secret'

/**
 * Host tasks (sentry threads, stubs, gofer) a sandbox may use per process of its user, plus a
 * base: on the ptrace platform one guest process costs about 23 host tasks, and an idle sandbox
 * about 210. Past this backstop gVisor cannot make a stub and the whole sandbox dies.
 */
const HOST_TASKS_PER_PROCESS = 32
const HOST_TASKS_BASE = 1024

/** Processes the sandbox user may have when the limits name none. */
const DEFAULT_USER_PROCESSES = 1024

/** The host paths of one sandbox the bundle is made from. */
export interface GvisorPaths {
  /** The sandbox's folder (bundle, skeleton root, log). */
  dir: string
  /** The workspace on the host. */
  workspace: string
  /** The generated /etc files on the host. */
  etcDir: string
  /** The link dir (root's, 0700). */
  socketDir: string
  /** The sandbox's link secret. */
  linkSecret: string
  /** The OCI cgroupsPath runsc makes the sandbox's host cgroup at. */
  cgroupsPath: string
}

/** What else the bundle needs. */
export interface GvisorBundleInput {
  /** The sandbox's paths. */
  paths: GvisorPaths
  /** Its spec (limits, environment, agent settings). */
  spec: SandboxSpec
  /** The agent's files. */
  runtime: AgentRuntime
  /** The preload library on the host. */
  preload: string
  /** Uid and gid of the sandbox user. */
  uid: number
  /** An image dir to use as the root instead of a skeleton over the host's system dirs. */
  rootfs: string | undefined
}

/** The host file the preload counts the sandbox's OOM kills in (on the sandbox's disk, when it has one). */
export function oomEventsFile(paths: Pick<GvisorPaths, 'etcDir'>): string {
  return join(dirname(paths.etcDir), 'oom-events')
}

/** Writes the sandbox's bundle and the files it binds; returns the bundle dir. */
export function writeGvisorBundle(input: GvisorBundleInput): string {
  const { paths, spec, runtime, uid } = input
  const memory = spec.limits.memoryBytes
  const pids = spec.limits.pids ?? DEFAULT_USER_PROCESSES

  const etcFiles: Record<string, string> = {
    ...sandboxEtcFiles(uid, GUEST_WORKSPACE),
    'ld.so.preload': `${GUEST_PRELOAD_PATH}\n`,
    [GUEST_PROCESS_MEMORY_FILE.slice('/etc/'.length)]: memory === undefined ? '0\n' : `${memory}\n`,
  }
  for (const [name, text] of Object.entries(etcFiles))
    writeFileSync(join(paths.etcDir, name), text, { mode: 0o644 })

  // The preload (running as the sandbox user) counts here the processes it ends for the memory
  // limit; the count survives restarts of the sandbox.
  const oomEvents = oomEventsFile(paths)
  if (!existsSync(oomEvents)) writeFileSync(oomEvents, 'oom_kill 0\n', { mode: 0o600 })
  chownSync(oomEvents, uid, uid)

  // The skeleton root holds the host's top-level symlinks (bin -> usr/bin) and the runtime's
  // symlinks; runsc adds the mount points it needs to whichever root it gets.
  const rootfs = input.rootfs ?? join(paths.dir, 'rootfs')
  const optDir = join(paths.dir, 'opt')
  rmSync(optDir, { recursive: true, force: true })
  mkdirSync(optDir, { recursive: true, mode: 0o755 })
  for (const [target, path] of runtime.symlinks) {
    const at = join(optDir, path.slice(GUEST_RUNTIME_DIR.length))
    mkdirSync(dirname(at), { recursive: true })
    symlinkSync(target, at)
  }
  if (input.rootfs === undefined) {
    rmSync(rootfs, { recursive: true, force: true })
    mkdirSync(rootfs, { mode: 0o755 })
    for (const [target, path] of hostSystemSymlinks()) {
      mkdirSync(dirname(join(rootfs, path)), { recursive: true })
      symlinkSync(target, join(rootfs, path))
    }
  }

  ensurePrivateDir(paths.socketDir)
  rmSync(agentSocketPath(paths.socketDir), { force: true })
  const secretFile = join(paths.socketDir, SECRET_NAME)
  rmSync(secretFile, { force: true })
  writeFileSync(secretFile, paths.linkSecret, { mode: 0o400 })

  const env: Record<string, string> = {
    ...sandboxBaseEnv({ user: SANDBOX_USER, home: GUEST_WORKSPACE, path: DEFAULT_SANDBOX_PATH }),
    ...spec.env,
  }
  const agent = agentCommand(runtime.node, runtime.entry, {
    socket: `${GUEST_LINK_DIR}/agent.sock`,
    secretFile: `${GUEST_LINK_DIR}/${SECRET_NAME}`,
    sandboxUid: uid,
    sandboxGid: uid,
    oomEvents: GUEST_OOM_EVENTS,
    root: GUEST_WORKSPACE,
    scrollbackBytes: spec.scrollbackBytes,
    maxSessions: spec.maxSessions,
  })
  const config = ociSpec({
    rootfs,
    hostSystem: input.rootfs === undefined,
    hostname: SANDBOX_HOSTNAME,
    workspace: paths.workspace,
    linkDir: paths.socketDir,
    etcFiles: Object.fromEntries(Object.keys(etcFiles).map((n) => [n, join(paths.etcDir, n)])),
    optDir,
    extraFiles: [
      { host: input.preload, guest: GUEST_PRELOAD_PATH },
      { host: oomEvents, guest: GUEST_OOM_EVENTS, writable: true },
    ],
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
    cgroupsPath: paths.cgroupsPath,
    env,
    // pid 1 is a shell that waits for the agent, reaping every orphan meanwhile (wait(2) takes
    // any child), and exits with the agent, which stops the container.
    args: ['/bin/sh', '-c', '"$@" & wait $!', 'conch-init', ...agent],
  })
  const bundle = join(paths.dir, 'bundle')
  mkdirSync(bundle, { recursive: true, mode: 0o700 })
  writeFileSync(join(bundle, 'config.json'), JSON.stringify(config, null, 2), { mode: 0o600 })
  return bundle
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
