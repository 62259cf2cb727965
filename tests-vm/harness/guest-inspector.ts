// Reads the guest from inside: a sandbox of the VM runner's local driver, which runs as root in
// the guest with no isolation, so its commands see every process, the cgroup tree, the mounts,
// loop devices and the runner's state dir. Tests use it to capture a sandbox's footprint while
// it lives and to list what of it is left once destroyed, and to restart the guest's runner
// through /init's control fifo. The runner offers the local driver only for this: global-setup.ts
// makes the one inspector sandbox of the run, and test files reach it by id; their own
// sandboxes use the runner's default, the namespace driver.
import { Sandbox } from '@conch/sdk'
import { vi } from 'vitest'
import { VmError } from './vm-error.ts'

/** Where the runner in the guest keeps its state (/init's --state-dir). */
const GUEST_STATE_DIR = '/var/lib/conch'

/** Where the guest mounts cgroup2. */
const GUEST_CGROUP_MOUNT = '/sys/fs/cgroup'

/** /init's pid file of the current runner. */
const RUNNER_PID_FILE = '/run/conch-vm/runner.pid'

/** /init's control fifo: a `restart` line restarts the runner. */
const CONTROL_FIFO = '/run/conch-vm/control'

/** How long a restarted runner may take to answer again under TCG. */
const RESTART_TIMEOUT_MS = 90_000

/** What of one sandbox exists in the guest, captured while it lives. */
export interface GuestFootprint {
  /** Sandbox id. */
  id: string
  /** Its processes: every process in one of its cgroups, with its start time. */
  processes: Array<{ pid: number; startTime: string }>
  /** Its cgroup dirs (the sandbox group and every group below it). */
  cgroupDirs: string[]
}

/** How to reach the VM's runner. */
export interface InspectorOptions {
  /** The runner's URL on the host. */
  url: string
  /** Its API key. */
  apiKey: string
}

// The scripts below read /proc with bash builtins: under TCG every fork costs tens of
// milliseconds, and /proc holds a few hundred processes.

/** Bash that sets `groups` to the cgroup lines of /proc entry `$dir`, empty when it is gone. */
const READ_GROUPS = `groups=; { IFS= read -r -d '' groups < "$dir/cgroup"; } 2> /dev/null; groups=\${groups%$'\\n'}`

/** Bash that sets `state` and `start` from /proc entry `$dir`'s stat (fields 3 and 22); false when it is gone. */
const READ_STAT = `{ read -r stat < "$dir/stat"; } 2> /dev/null && set -- \${stat##*) } && state=$1 start=\${20}`

/**
 * Bash that prints `proc <pid> <starttime>` for every process whose cgroup path has a part
 * named `$1`, and `cgroup <dir>` for every cgroup dir named `$1` and each dir below it.
 */
const FOOTPRINT_SCRIPT = `
id=$1
for dir in /proc/[0-9]*; do
  ${READ_GROUPS}
  case "$groups/" in *"/$id/"*) ;; *) continue ;; esac
  ${READ_STAT} && echo "proc \${dir#/proc/} $start"
done
find ${GUEST_CGROUP_MOUNT} -depth -type d -path "*/$id*" 2> /dev/null | sed 's/^/cgroup /'
`

/**
 * Bash that prints one line per thing of sandbox `$1` still in the guest: a process in its
 * cgroups, a cgroup dir, a mount or loop device naming it, or a state file named after it.
 */
const LEFTOVERS_SCRIPT = `
id=$1
for dir in /proc/[0-9]*; do
  ${READ_GROUPS}
  case "$groups/" in *"/$id/"*) echo "process \${dir#/proc/} is in a cgroup of the sandbox: $groups" ;; esac
done
find ${GUEST_CGROUP_MOUNT} -type d -path "*/$id*" 2> /dev/null | sed 's/^/cgroup still exists: /'
while IFS= read -r line; do
  case $line in *"$id"*) echo "mount still exists: $line" ;; esac
done < /proc/self/mountinfo
for f in /sys/block/loop*/loop/backing_file; do
  backing=; { read -r backing < "$f"; } 2> /dev/null
  case $backing in *"$id"*) echo "loop device \${f#/sys/block/} still backs $backing" ;; esac
done
find ${GUEST_STATE_DIR} -name "*$id*" 2> /dev/null | sed 's/^/state file still exists: /'
true
`

/**
 * Bash that prints, for each `pid:starttime` argument, a line when that process still runs (same
 * start time, not a zombie): a recycled pid is another process, not a leftover.
 */
const STILL_RUNNING_SCRIPT = `
for p in "$@"; do
  dir=/proc/\${p%%:*}
  ${READ_STAT} || continue
  [ "$state" != Z ] && [ "$start" = "\${p#*:}" ] && echo "process \${dir#/proc/} still runs: $(tr '\\0' ' ' < "$dir/cmdline")"
done
true
`

/** Quotes a value for a POSIX shell. */
function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

/** A root shell in the guest, through a local-driver sandbox of the VM's runner. */
export class GuestInspector {
  readonly #sandbox: Sandbox

  private constructor(sandbox: Sandbox) {
    this.#sandbox = sandbox
  }

  /** Reaches the inspector sandbox `id`, a local-driver sandbox (global-setup.ts makes it). */
  static async connect(id: string, options: InspectorOptions): Promise<GuestInspector> {
    return new GuestInspector(await Sandbox.connect(id, options))
  }

  /** Runs a bash script with arguments as root in the guest and returns its stdout; throws on a non-zero exit. */
  async run(script: string, args: readonly string[] = []): Promise<string> {
    const command = `bash -c ${shellQuote(script)} inspector ${args.map(shellQuote).join(' ')}`
    const result = await this.#sandbox.exec(command, { timeoutMs: 60_000 })
    if (result.exitCode !== 0) {
      throw new VmError(
        'VM_COMMAND_FAILED',
        `the guest inspector's command exited ${result.exitCode}: ${result.stderr || result.stdout}`,
      )
    }
    return result.stdout
  }

  /** The processes and cgroup dirs of a live sandbox. */
  async footprint(id: string): Promise<GuestFootprint> {
    const footprint: GuestFootprint = { id, processes: [], cgroupDirs: [] }
    for (const line of (await this.run(FOOTPRINT_SCRIPT, [id])).split('\n')) {
      const [kind, ...rest] = line.split(' ')
      if (kind === 'proc' && rest.length === 2) {
        footprint.processes.push({ pid: Number(rest[0]), startTime: rest[1] ?? '' })
      } else if (kind === 'cgroup') {
        footprint.cgroupDirs.push(rest.join(' '))
      }
    }
    return footprint
  }

  /** What of a sandbox is still in the guest: processes, cgroups, mounts, loop devices, state files. */
  async leftovers(footprint: GuestFootprint): Promise<string[]> {
    const pids = footprint.processes.map((p) => `${p.pid}:${p.startTime}`)
    const lines = [
      ...(await this.run(STILL_RUNNING_SCRIPT, pids)).split('\n'),
      ...(await this.run(LEFTOVERS_SCRIPT, [footprint.id])).split('\n'),
    ]
    return lines.filter((line) => line !== '')
  }

  /** The pid of the guest's current runner. */
  async runnerPid(): Promise<number> {
    return Number((await this.run(`cat ${RUNNER_PID_FILE}`)).trim())
  }

  /**
   * Restarts the guest's runner on its state dir (SIGTERM: its agents keep running) and resolves
   * once a new runner answers. The request that asks for it may lose its answer to the restart,
   * so success is the new runner's pid, read through that runner.
   */
  async restartRunner(): Promise<void> {
    const before = await this.runnerPid()
    const asked = this.run(`echo restart > ${CONTROL_FIFO}`).then(
      () => null,
      (error: unknown) => error,
    )
    try {
      await vi.waitFor(
        async () => {
          const now = await this.runnerPid()
          if (now === before) throw new Error(`the runner is still pid ${before}`)
        },
        { timeout: RESTART_TIMEOUT_MS, interval: 500 },
      )
    } catch (error) {
      const askError = await asked
      throw new VmError(
        'VM_COMMAND_FAILED',
        `the guest's runner (pid ${before}) did not restart within ${RESTART_TIMEOUT_MS} ms${askError ? `; asking for it failed: ${String(askError)}` : ''}`,
        { cause: error },
      )
    }
  }
}
