// Spawning a namespace sandbox's process chain: the agent's command line, the `sh` → `setpriv` →
// bwrap chain around it (sandbox-launch.ts holds the chain's script), detached from the runner
// and logging to `agent.log`, with the agent's socket on fd 4 and pipes for the secret (5), the
// seccomp filter (6), bwrap's options (7), `go` (8) and, with a disk, the format's report (9).
import { spawn } from 'node:child_process'
import { closeSync, openSync } from 'node:fs'
import { join } from 'node:path'
import { agentCommand } from '@conch/protocol'
import { bindAgentSocket } from './agent-endpoint.ts'
import type { AgentRuntime } from './agent-runtime.ts'
import type { ChainExits } from './chain-exits.ts'
import { GUEST_WORKSPACE, type NamespaceState } from './namespace-state.ts'
import type { SandboxSpec } from './sandbox-driver.ts'
import { ARGS_FD, chainArgs, type DiskFormat, findBinary, type Launch, spawned } from './sandbox-launch.ts'
import type { BwrapSeccomp } from './seccomp-filter.ts'
import { GUEST_WORK_CGROUP } from './work-cgroup.ts'

/** What a chain is spawned with besides the sandbox's state and spec. */
export interface ChainSpawn {
  /** The sandbox uid (and gid). */
  uid: number
  /** The agent's runtime. */
  runtime: AgentRuntime
  /** bwrap's seccomp filter (read on fd 6). */
  seccomp: BwrapSeccomp
  /** The disk the chain formats and mounts first; null without a disk limit. */
  disk: DiskFormat | null
  /** Where the chain's exit is recorded. */
  exits: ChainExits
}

/** The command bwrap runs inside: a `sh` that drops the chain's fds (and sets RLIMIT_NPROC when asked), then the agent. */
function innerCommand(state: NamespaceState, spec: SandboxSpec, o: ChainSpawn): string[] {
  const work = state.cgroup?.work ?? null
  const agent = agentCommand(
    o.runtime.node,
    o.runtime.entry,
    {
      listenFd: 4,
      secretFd: 5,
      // Rootless, the agent already is the sandbox uid, the only one its namespace maps.
      ...(state.rootless ? {} : { sandboxUid: o.uid, sandboxGid: o.uid }),
      ...(work === null
        ? {}
        : { workCgroup: GUEST_WORK_CGROUP.procs, oomEvents: GUEST_WORK_CGROUP.oomEvents }),
      ...(work?.pidsProcs === undefined ? {} : { workPidsCgroup: GUEST_WORK_CGROUP.pidsProcs }),
      root: GUEST_WORKSPACE,
      scrollbackBytes: spec.scrollbackBytes,
      maxSessions: spec.maxSessions,
    },
    o.runtime.compileCache,
  )
  // Rootless without cgroups, RLIMIT_NPROC set inside the user namespace bounds its tasks.
  const nproc = state.rootless && state.cgroup === null && spec.limits.pids !== undefined
  return [
    '/bin/sh',
    '-c',
    `${nproc ? `ulimit -p ${spec.limits.pids} && ` : ''}exec "$@" 3<&- 6<&- ${ARGS_FD}<&-`,
    'sh',
    ...agent,
  ]
}

/**
 * Spawns the sandbox's chain detached, logging to `agent.log`: `sh` (root) joins the
 * sandbox's cgroups and then waits for `go` on a pipe (`release` writes it after bwrap's
 * options); only then does it exec `setpriv` (to the sandbox uid) and bwrap. Anything else on
 * that pipe, or its end (a runner that died), ends the chain before bwrap starts.
 */
export async function spawnChain(state: NamespaceState, spec: SandboxSpec, o: ChainSpawn): Promise<Launch> {
  let endpoint: Awaited<ReturnType<typeof bindAgentSocket>> | undefined
  let logFd: number | undefined
  try {
    endpoint = await bindAgentSocket(state.socketDir)
    logFd = openSync(join(state.dir, 'agent.log'), 'a', 0o600)
    const command = innerCommand(state, spec, o)
    const id = String(o.uid)
    const toUid = state.rootless
      ? []
      : [findBinary('setpriv')!, `--reuid=${id}`, `--regid=${id}`, '--clear-groups', '--']
    const child = spawn(
      findBinary('sh')!,
      chainArgs({
        disk: o.disk,
        join: state.cgroup?.join ?? [],
        // Rootless, bwrap makes the user namespace itself.
        usernsUid: state.rootless ? null : o.uid,
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
          ...(o.disk === null ? [] : ['pipe' as const]),
        ],
        env: {},
        cwd: '/',
      },
    )
    const pid = await spawned(child)
    o.exits.track(pid, child)
    child.unref()
    return { child, pid, command, runtime: o.runtime, seccomp: o.seccomp }
  } finally {
    endpoint?.close()
    if (logFd !== undefined) closeSync(logFd)
  }
}
