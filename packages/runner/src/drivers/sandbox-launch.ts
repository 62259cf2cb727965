// How the namespace driver starts a sandbox's processes: where it finds its programs, the user
// namespace a root runner prepares (maps written by the runner, so host root can be mapped), the
// pipe that hands bwrap its options, and the reason a sandbox ended, from bwrap's exit.
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, openSync, readlinkSync, writeFileSync } from 'node:fs'
import { constants as osConstants } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { RunnerError } from '../runner-error.ts'

/** Folders searched for bwrap, unshare, setpriv and sh. */
export const SYSTEM_BIN_DIRS = ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin']

/** The fd on which bwrap reads its options (`--args`), NUL-separated. */
export const ARGS_FD = 7

/** The fd on which a held sandbox chain waits for `go` before it starts bwrap (see `release`). */
export const GO_FD = 8

/** The first of `SYSTEM_BIN_DIRS/name` that exists. */
export function findBinary(name: string): string | null {
  for (const dir of SYSTEM_BIN_DIRS) if (existsSync(join(dir, name))) return join(dir, name)
  return null
}

/** A user namespace owned by `uid` mapping host root and `uid` (a root runner writes the maps); returns its fd. */
export async function rootUserNamespace(uid: number): Promise<number> {
  const holder = spawn(findBinary('unshare')!, ['--user', '--', findBinary('sh')!, '-c', 'read _'], {
    stdio: ['pipe', 'ignore', 'ignore'],
    uid: uid,
    gid: uid,
    env: {},
    cwd: '/',
  })
  try {
    const pid = await spawned(holder)
    const own = readlinkSync('/proc/self/ns/user')
    const deadline = Date.now() + 5_000
    while (readNs(pid) === own) {
      if (Date.now() > deadline)
        throw new RunnerError('AGENT_UNAVAILABLE', 'unshare --user did not create a user namespace')
      await new Promise((r) => setTimeout(r, 1))
    }
    const map = `0 0 1\n${uid} ${uid} 1\n`
    writeFileSync(`/proc/${pid}/uid_map`, map)
    writeFileSync(`/proc/${pid}/gid_map`, map)
    return openSync(`/proc/${pid}/ns/user`, 'r')
  } finally {
    holder.kill('SIGKILL')
  }
}

/**
 * Why a sandbox ended, from its bwrap's exit: bwrap exits with the agent's status, and 128+n
 * when a signal n killed the agent (a kill from outside; the OOM killer never picks the agent).
 */
export function exitReason(code: number | null, signal: NodeJS.Signals | null): string {
  if (signal) return `the sandbox was killed by ${signal}`
  const agentSignal =
    code !== null && code > 128
      ? Object.entries(osConstants.signals).find(([, n]) => n === code - 128)?.[0]
      : undefined
  if (agentSignal) return `its agent was killed by ${agentSignal} (exit code ${code})`
  return `its agent exited with code ${code}`
}

/** Writes bwrap's options into its `--args` pipe; a bwrap that dies first is reported by its exit. */
export function feedArgs(child: ChildProcess, args: string[]): void {
  const pipe = child.stdio.at(ARGS_FD)
  if (!(pipe instanceof Writable)) throw new RunnerError('INTERNAL', `fd ${ARGS_FD} of bwrap is not a pipe`)
  pipe.on('error', () => {})
  pipe.end(args.map((a) => `${a}\0`).join(''))
}

/** Lets a held chain (spawned with a pipe on `GO_FD`) go on to bwrap. */
export function release(child: ChildProcess): void {
  const pipe = child.stdio.at(GO_FD)
  if (!(pipe instanceof Writable))
    throw new RunnerError('INTERNAL', `fd ${GO_FD} of the sandbox chain is not a pipe`)
  pipe.on('error', () => {})
  pipe.end('go\n')
}

/** The user namespace of a process, or null once it is gone. */
function readNs(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/user`)
  } catch {
    return null
  }
}

/** Resolves with the pid once `child` has spawned; AGENT_UNAVAILABLE when it cannot. */
export function spawned(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    child.once('error', (error) =>
      reject(
        new RunnerError('AGENT_UNAVAILABLE', `could not start the sandbox: ${error.message}`, {
          cause: error,
        }),
      ),
    )
    child.once('spawn', () => resolve(child.pid ?? 0))
  })
}
