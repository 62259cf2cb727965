// Process creation, the agent's one seam for it. Inside a sandbox the agent runs as a different
// user than the code it serves, so that code cannot ptrace, signal or read the agent: every
// shell and process is started as the sandbox user. Where the driver gives a work cgroup, each
// child first moves itself into it (a write to its cgroup.procs) and only then runs anything,
// so a command that exhausts the sandbox's memory is OOM-killed there and never the agent.
import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process'

/** Starts a child process; injected so the agent's process creation has one seam. */
export type Spawn = (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess

/** The user that shells and processes run as. */
export interface SandboxUser {
  /** Uid. */
  uid: number
  /** Gid. */
  gid: number
}

/** The real `child_process.spawn`. */
export const nodeSpawn: Spawn = (command, args, options) => spawn(command, args, options)

/** Single-quotes a path for sh. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`
}

/**
 * A spawn that starts every child as `user` (when given) and, when `workCgroup` names a
 * cgroup.procs file, through `/bin/sh` moving the child into that group first: the command
 * (`$0`) runs only if the move succeeded. The pid is the command's own, since sh execs into it.
 */
export function sandboxSpawn(
  base: Spawn,
  user: SandboxUser | undefined,
  workCgroup: string | undefined,
): Spawn {
  if (!user && workCgroup === undefined) return base
  const enter = workCgroup === undefined ? '' : `echo 0 > ${shellQuote(workCgroup)} && exec "$0" "$@"`
  return (command, args, options) => {
    const opts: SpawnOptions = user ? { ...options, uid: user.uid, gid: user.gid } : options
    return enter ? base('/bin/sh', ['-c', enter, command, ...args], opts) : base(command, args, opts)
  }
}
