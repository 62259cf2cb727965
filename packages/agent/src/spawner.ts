// Process creation, the agent's one seam for it. Inside a sandbox the agent runs as a different
// user than the code it serves, so that code cannot ptrace, signal or read the agent: every
// shell and process is started as the sandbox user. Where the driver gives a work cgroup, each
// child is held before it runs anything: it starts as `sh` waiting on a pipe, the agent (root
// in the sandbox, which cgroup v2's delegation rules require) writes the child's pid into the
// work group's cgroup.procs (on cgroup v1, one per hierarchy), and only then releases it to exec the command. So a command that
// exhausts the sandbox's memory is OOM-killed in `work` and never takes the agent with it, and
// no user code ever runs outside `work`. The moves are written off the agent's thread: a write
// to cgroup.procs can wait for an RCU grace period (milliseconds), and the agent keeps serving
// meanwhile; the child still runs nothing until every move is done.
import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { Writable } from 'node:stream'
import type { Logger } from './logger.ts'

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

/** Waits for the agent's go on fd 3, closes it, then runs the command (`$0`) with its arguments. */
const HOLD = 'read -r _ <&3 && exec "$0" "$@" 3<&-'

/** One stdio slot of a child. */
type StdioSlot = Extract<NonNullable<SpawnOptions['stdio']>, unknown[]>[number]

/** The child's first three stdio slots as an array. */
function stdioOf(options: SpawnOptions): StdioSlot[] {
  const stdio = options.stdio ?? 'pipe'
  if (Array.isArray(stdio)) return [stdio[0] ?? 'pipe', stdio[1] ?? 'pipe', stdio[2] ?? 'pipe']
  return [stdio, stdio, stdio]
}

/**
 * A spawn that starts every child as `user` (when given) and, when `workCgroups` names
 * cgroup.procs files, holds it until its pid is in each of those groups. A child whose move
 * fails never runs its command: its gate closes empty and it exits 1.
 */
export function sandboxSpawn(
  base: Spawn,
  user: SandboxUser | undefined,
  workCgroups: readonly string[],
  logger: Logger,
): Spawn {
  if (!user && workCgroups.length === 0) return base
  return (command, args, options) => {
    const opts: SpawnOptions = user ? { ...options, uid: user.uid, gid: user.gid } : options
    if (workCgroups.length === 0) return base(command, args, opts)
    const child = base('/bin/sh', ['-c', HOLD, command, ...args], {
      ...opts,
      stdio: [...stdioOf(options), 'pipe'],
    })
    const gate = child.stdio[3]
    if (!(gate instanceof Writable)) return child
    gate.on('error', () => {})
    if (child.pid === undefined) {
      gate.destroy()
      return child
    }
    void moveInto(workCgroups, child.pid).then(
      () => gate.end('\n'),
      (error: unknown) => {
        logger.warn(
          { err: error instanceof Error ? error.message : String(error) },
          'could not move a child into the work cgroup; it will not run',
        )
        gate.destroy()
      },
    )
    return child
  }
}

/** Writes `pid` into each cgroup.procs file, one after another. */
async function moveInto(workCgroups: readonly string[], pid: number): Promise<void> {
  for (const procs of workCgroups) await writeFile(procs, String(pid))
}
