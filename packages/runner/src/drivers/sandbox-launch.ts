// How the namespace driver starts a sandbox's processes: where it finds its programs, the first
// process's script (cgroup joins, the user namespace a root runner prepares, with maps written as
// root so host root can be mapped, and the hold until `go`), the pipe that hands bwrap its
// options, and the reason a sandbox ended, from bwrap's exit.
import type { ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { constants as osConstants } from 'node:os'
import { join } from 'node:path'
import { Readable, Writable } from 'node:stream'
import { RunnerError } from '../runner-error.ts'
import type { AgentRuntime } from './agent-runtime.ts'
import type { BwrapSeccomp } from './seccomp-filter.ts'

/** Folders searched for bwrap, unshare, setpriv, sleep and sh. */
export const SYSTEM_BIN_DIRS = ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin']

/** The fd on which bwrap reads its options (`--args`), NUL-separated. */
export const ARGS_FD = 7

/** The fd on which a held sandbox chain waits for `go` before it starts bwrap (see `release`). */
export const GO_FD = 8

/**
 * The fd on which a sandbox chain that formats its disk reports the outcome: `ok`, or the failed
 * tool's name, a newline and its message. Its end means the format and mount are over.
 */
export const DISK_FD = 9

/** The first of `SYSTEM_BIN_DIRS/name` that exists. */
export function findBinary(name: string): string | null {
  for (const dir of SYSTEM_BIN_DIRS) if (existsSync(join(dir, name))) return join(dir, name)
  return null
}

/**
 * The script of a sandbox's first process, `sh` run as root by the runner (its arguments:
 * `chainArgs`). Given a disk, it first forks a subshell (left in the runner's cgroups, so the
 * format is not charged to the sandbox) that formats the disk (unless it is a spare the runner
 * took already formatted, see workspace-disk.ts) and mounts it, and reports on `DISK_FD`, which
 * the shell itself closes: the runner spawns no mkfs or mount of its own. When nobody reads the
 * report (the runner died mid-create), it unmounts the disk and deletes the image. Once it has
 * reported `ok` it becomes (exec, closing its end of the report) a format of the next spare at
 * the lowest priority, into a file it then renames into place, so a spare is complete or absent;
 * its command line names only the spare, not the sandbox. As root the shell then starts the
 * holder of the user namespace bwrap joins: a process started as the sandbox uid that unshares
 * one (so that uid owns it). While the holder execs, the shell writes its own pid into each
 * cgroup.procs given (a write that can wait for an RCU grace period), so every later fork is
 * counted; it then writes the holder's maps (`0 0 1` and `uid uid 1`: only root may map host
 * root) and opens its namespace as fd 3, and the holder, which ran nothing but `sleep` and never
 * joined the sandbox's cgroups, is killed and reaped. It then waits for `go` on `GO_FD` (anything
 * else, or the pipe's end, stops it) and execs the rest, closing that fd. Forks from this small
 * shell cost little, where each fork of the runner copies its page tables.
 */
const CHAIN_SCRIPT = `if [ "$1" = disk ]; then
  (
    trap '' PIPE
    if [ "$7" = format ]; then
      e=$("$2" -q -F -m 0 -E lazy_itable_init=1,lazy_journal_init=1 "$5" 2>&1 >/dev/null) || { printf 'mkfs.ext4\\n%s' "$e" >&${DISK_FD}; exit 1; }
    fi
    e=$("$3" -o loop,nodev,nosuid "$5" "$6" 2>&1 >/dev/null) || { printf 'mount\\n%s' "$e" >&${DISK_FD}; exit 1; }
    echo ok >&${DISK_FD} 2>/dev/null || { "$4" "$6" || "$4" -l "$6"; rm -f "$5"; exit 0; }
    [ "$8" = - ] && exit 0
    exec "$8" -n 19 /bin/sh -c '"$1" -q -F -m 0 -E lazy_itable_init=1,lazy_journal_init=1 "$3" && "$2" -f "$3" "$4" || rm -f "$3"' conch-spare-disk "$2" "$9" "\${10}" "\${11}" ${DISK_FD}>&- >/dev/null 2>&1
  ) </dev/null &
  exec ${DISK_FD}>&-
  shift 11
fi
if [ "$1" = userns ]; then
  "$2" --reuid="$5" --regid="$5" --clear-groups -- "$3" --user -- "$4" 60 </dev/null >/dev/null 2>&1 &
  h=$!
  u=$5
  shift 5
else
  shift
fi
while [ "$1" != -- ]; do echo $$ > "$1" || { [ -z "$h" ] || kill -9 $h; exit 125; }; shift; done; shift
if [ -n "$h" ]; then
  while [ /proc/$h/ns/user -ef /proc/$$/ns/user ]; do :; done
  m="0 0 1
$u $u 1"
  { echo "$m" > /proc/$h/uid_map && echo "$m" > /proc/$h/gid_map && exec 3< /proc/$h/ns/user; } || { kill -9 $h; echo "conch: could not make the sandbox's user namespace" >&2; exit 125; }
  kill -9 $h
  wait $h 2>/dev/null
fi
read -r go <&${GO_FD} && [ "$go" = go ] || exit 125
exec "$@" ${GO_FD}<&-`

/** The tools and paths of a disk a sandbox's first process formats and mounts. */
export interface DiskFormat {
  /** mkfs.ext4's path. */
  mkfs: string
  /** mount's path. */
  mountTool: string
  /** umount's path. */
  umountTool: string
  /** The sparse image, already sized. */
  image: string
  /** The folder it is mounted on, already made. */
  mount: string
  /** Whether the image is a spare the runner took already formatted (then it is only mounted). */
  formatted: boolean
  /** The next spare to format once this disk is mounted, or null (see workspace-disk.ts). */
  refill: SpareRefill | null
}

/** A spare disk the chain formats after its own: into `tmp`, then renamed to `spare`. */
export interface SpareRefill {
  /** nice's path (the format runs at the lowest priority). */
  nice: string
  /** mv's path. */
  mv: string
  /** The sparse file, already sized, that is formatted. */
  tmp: string
  /** Where the formatted spare is kept. */
  spare: string
}

/**
 * Resolves once the chain's disk is formatted and mounted (its `DISK_FD` pipe ends after `ok`);
 * AGENT_UNAVAILABLE, naming the tool and its message as a runner-run tool's failure would, when
 * not. The pipe ends only when the format's processes are gone, so afterwards the disk is
 * either mounted or not, for good: a cleanup after it sees the final state.
 */
export function diskReady(child: ChildProcess, disk: DiskFormat): Promise<void> {
  const pipe = child.stdio.at(DISK_FD)
  if (!(pipe instanceof Readable))
    return Promise.reject(new RunnerError('INTERNAL', `fd ${DISK_FD} of the sandbox chain is not a pipe`))
  return new Promise((resolve, reject) => {
    let report = ''
    pipe.setEncoding('utf8').on('data', (chunk: string) => {
      report += chunk
    })
    pipe.once('error', () => {})
    pipe.once('close', () => {
      if (report === 'ok\n') return resolve()
      const newline = report.indexOf('\n')
      const [name, args] = report.startsWith('mount\n')
        ? ['mount', `-o loop,nodev,nosuid ${disk.image} ${disk.mount}`]
        : ['mkfs.ext4', `-q -F -m 0 -E lazy_itable_init=1,lazy_journal_init=1 ${disk.image}`]
      const detail =
        newline < 0
          ? 'the sandbox chain ended before it was done'
          : report.slice(newline + 1).trim() || 'failed'
      reject(new RunnerError('AGENT_UNAVAILABLE', `${name} ${args} failed: ${detail}`))
    })
  })
}

/** What a sandbox's first process does before it execs `command`. */
export interface ChainOptions {
  /** The cgroup.procs files it joins. */
  join: readonly string[]
  /** As root: the uid owning the user namespace made for bwrap (fd 3); null rootless (bwrap makes its own). */
  usernsUid: number | null
  /** As root: the disk it formats and mounts before anything else, reporting on `DISK_FD`. */
  disk?: DiskFormat | null
  /** What it execs once released: setpriv and bwrap, with their arguments. */
  command: readonly string[]
}

/** `sh`'s argv for a sandbox's first process (see `CHAIN_SCRIPT`). */
export function chainArgs(o: ChainOptions): string[] {
  const userns =
    o.usernsUid === null
      ? ['-']
      : ['userns', findBinary('setpriv')!, findBinary('unshare')!, findBinary('sleep')!, String(o.usernsUid)]
  const d = o.disk
  const refill = d?.refill ? [d.refill.nice, d.refill.mv, d.refill.tmp, d.refill.spare] : ['-', '-', '-', '-']
  const disk = d
    ? [
        'disk',
        d.mkfs,
        d.mountTool,
        d.umountTool,
        d.image,
        d.mount,
        d.formatted ? 'mount' : 'format',
        ...refill,
      ]
    : []
  return ['-c', CHAIN_SCRIPT, 'conch-sandbox', ...disk, ...userns, ...o.join, '--', ...o.command]
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

/** A sandbox's chain, spawned and held before bwrap until its options arrive. */
export interface Launch {
  /** The chain's process: `sh`, then `setpriv`, then bwrap (the sandbox's first process). */
  child: ChildProcess
  /** Its pid. */
  pid: number
  /** The command bwrap runs inside (on its command line, after its options). */
  command: string[]
  /** The agent's runtime the command names. */
  runtime: AgentRuntime
  /** The seccomp filter bwrap reads on fd 6. */
  seccomp: BwrapSeccomp
}

/** Ends a chain that was never released: killed, its pipes closed. */
export function endLaunch(launch: Launch): void {
  try {
    process.kill(launch.pid, 'SIGKILL')
  } catch {
    // already gone
  }
  for (const pipe of launch.child.stdio) pipe?.destroy()
}
