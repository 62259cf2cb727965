// The options a namespace sandbox's bwrap reads from its `--args` pipe, from the sandbox's handle
// state and spec: the user namespace to join (root) or make (rootless), the agent's uid and
// capabilities, the mounts (workspace, generated /etc, the runtime, the work cgroup's files), the
// in-memory /tmp and /dev/shm sized from the memory limit, and the exact environment.
import { join } from 'node:path'
import { DEFAULT_SANDBOX_LIMITS } from '@conch/protocol'
import { AGENT_CAPS, bwrapArgs } from './bwrap-args.ts'
import type { NamespaceState } from './namespace-state.ts'
import { GUEST_WORKSPACE } from './namespace-state.ts'
import { DEFAULT_SANDBOX_PATH, sandboxBaseEnv } from './sandbox-base-env.ts'
import type { SandboxSpec } from './sandbox-driver.ts'
import { SANDBOX_HOSTNAME, SANDBOX_USER, sandboxEtcFiles } from './sandbox-etc-files.ts'
import type { Launch } from './sandbox-launch.ts'
import { GUEST_WORK_CGROUP } from './work-cgroup.ts'

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

/**
 * bwrap's options for a sandbox whose chain `launch` holds, without the command (which stays on
 * bwrap's command line, naming only paths inside). `uid` is the sandbox uid.
 */
export function namespaceBwrapOptions(
  state: NamespaceState,
  spec: SandboxSpec,
  uid: number,
  launch: Pick<Launch, 'command' | 'runtime' | 'seccomp'>,
): string[] {
  const args = bwrapArgs({
    usernsFd: state.rootless ? null : 3,
    agentUid: state.rootless ? uid : 0,
    agentCaps: state.rootless ? [] : AGENT_CAPS,
    // A cgroup namespace rooted at the agent's v2 leaf would hide `work` from the agent.
    unshareCgroup: state.cgroup === null || state.cgroup.version === 1,
    hostname: SANDBOX_HOSTNAME,
    workspace: state.workspace,
    etcFiles: Object.fromEntries(
      Object.keys(sandboxEtcFiles(uid, GUEST_WORKSPACE)).map((n) => [n, join(state.etcDir, n)]),
    ),
    runtime: launch.runtime,
    ...tmpSizes(state, spec),
    extraBinds: workBinds(state),
    env: {
      ...sandboxBaseEnv({ user: SANDBOX_USER, home: GUEST_WORKSPACE, path: DEFAULT_SANDBOX_PATH }),
      ...spec.env,
    },
    seccompArgs: launch.seccomp.args,
    // The agent must not inherit the namespace fd (3), the filter's (6) or the args' (7); it keeps 4 (socket) and 5 (secret).
    command: launch.command,
  })
  return args.slice(0, args.length - launch.command.length - 1)
}
