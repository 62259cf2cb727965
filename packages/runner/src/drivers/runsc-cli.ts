// The runsc command line, as the gVisor driver uses it: every call carries the same global
// flags (one state dir, the ptrace platform, no network, host unix sockets the sandbox creates,
// CPUs from the quota), runs with an empty environment from `/`, and is parsed at the boundary
// (`state` and `events --stats` answer JSON). A container is named by its sandbox id.
import { spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'
import { RunnerError } from '../runner-error.ts'

/** Folders searched for runsc. */
export const RUNSC_DIRS = ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/bin', '/sbin']

/** The first runsc in the system folders, or null. */
export function findRunsc(): string | null {
  for (const dir of RUNSC_DIRS) if (existsSync(join(dir, 'runsc'))) return join(dir, 'runsc')
  return null
}

/** How long a `runsc events --stats` call may take before its answer is given up. */
const STATS_TIMEOUT_MS = 2_000

/** What `runsc events --stats` reports of a container's guest (gVisor's own counters). */
const RunscStats = z.object({
  data: z.object({
    /** Guest tasks now. */
    pids: z.object({ current: z.number().int().nonnegative() }).optional(),
  }),
})

/** The guest counters the driver reads from `runsc events --stats`. */
export interface GuestStats {
  /** Processes and threads inside gVisor now. */
  pids: number
}

/** One runsc call's outcome. */
interface RunscResult {
  /** Exit code (null when a signal ended it). */
  code: number | null
  /** Its stdout. */
  stdout: string
  /** Its stderr. */
  stderr: string
}

/** runsc with one state dir (`--root`) and the flags every call of the gVisor driver shares. */
export class RunscCli {
  readonly #path: string
  readonly #root: string

  /** A runsc at `path` keeping its containers' state in `root`. */
  constructor(path: string, root: string) {
    this.#path = path
    this.#root = root
  }

  /** The flags of every call. */
  #globalArgs(): string[] {
    return [
      '--root',
      this.#root,
      '--platform=ptrace',
      '--network=none',
      '--host-uds=create',
      '--cpu-num-from-quota',
    ]
  }

  /** Runs runsc; resolves with its exit code and output (code null when `timeoutMs` passed and it was killed). */
  #run(args: string[], timeoutMs?: number): Promise<RunscResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.#path, [...this.#globalArgs(), ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {},
        cwd: '/',
        ...(timeoutMs === undefined ? {} : { timeout: timeoutMs, killSignal: 'SIGKILL' as const }),
      })
      let stdout = ''
      let stderr = ''
      child.stdout.setEncoding('utf8').on('data', (text: string) => {
        stdout += text
      })
      child.stderr.setEncoding('utf8').on('data', (text: string) => {
        stderr += text
      })
      child.once('error', reject)
      child.once('close', (code) => resolve({ code, stdout, stderr }))
    })
  }

  /** `runsc run --detach` of the bundle as container `id`, its output appended to `log`. */
  runDetached(bundle: string, id: string, log: string): Promise<void> {
    return this.#detached(['run', '--detach', '--bundle', bundle, id], id, log)
  }

  /**
   * `runsc restore --detach` of the checkpoint image in `imageDir` as container `id` with the
   * bundle (whose mounts name this sandbox's own host folders), its output appended to `log`.
   */
  restoreDetached(bundle: string, id: string, imageDir: string, log: string): Promise<void> {
    return this.#detached(['restore', '--detach', '--image-path', imageDir, '--bundle', bundle, id], id, log)
  }

  /**
   * `runsc checkpoint` of container `id` into `imageDir`: the whole sandbox's memory and
   * processes; the container stops. (`--leave-running` leaves this release's gofer mounts
   * failing with EIO, so a sandbox that goes on is restored from the image instead.)
   */
  async checkpoint(id: string, imageDir: string): Promise<void> {
    const result = await this.#run(['checkpoint', '--image-path', imageDir, id])
    if (result.code !== 0) {
      throw new RunnerError(
        'INTERNAL',
        `runsc checkpoint ${id} failed (exit ${result.code}): ${result.stderr.trim().split('\n')[0]?.slice(0, 500)}`,
      )
    }
  }

  /** Starts a detached runsc command for container `id`, its stdio on `log` (a pipe would stay open in the sandbox). */
  async #detached(args: string[], id: string, log: string): Promise<void> {
    const logFd = openSync(log, 'a', 0o600)
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        const child = spawn(this.#path, [...this.#globalArgs(), ...args], {
          detached: true,
          stdio: ['ignore', logFd, logFd],
          env: {},
          cwd: '/',
        })
        child.once('error', (error) =>
          reject(
            new RunnerError('AGENT_UNAVAILABLE', `could not start runsc: ${error.message}`, { cause: error }),
          ),
        )
        child.once('exit', (exitCode) => resolve(exitCode))
      })
      if (code !== 0) {
        const tail = readFileSync(log, 'utf8').trim().split('\n').slice(-3).join(' | ')
        throw new RunnerError(
          'AGENT_UNAVAILABLE',
          `runsc could not start sandbox ${id} (exit ${code}): ${tail}; see ${log}`,
        )
      }
    } finally {
      closeSync(logFd)
    }
  }

  /** The container's status (`running`, `stopped`...), or null when runsc knows no such container. */
  async status(id: string): Promise<string | null> {
    if (!existsSync(this.#root)) return null
    const result = await this.#run(['state', id])
    if (result.code !== 0) return null
    let json: unknown
    try {
      json = JSON.parse(result.stdout)
    } catch {
      return null
    }
    const parsed = z.object({ status: z.string() }).safeParse(json)
    return parsed.success ? parsed.data.status : null
  }

  /**
   * The guest's counters from `runsc events --stats`, or null when runsc cannot give them within
   * `STATS_TIMEOUT_MS`: the answer comes from the sandbox's own kernel, which its code can keep
   * busy, and a usage read must not hold up the runner's other requests.
   */
  async stats(id: string): Promise<GuestStats | null> {
    const result = await this.#run(['events', '--stats', id], STATS_TIMEOUT_MS)
    if (result.code !== 0) return null
    let json: unknown
    try {
      json = JSON.parse(result.stdout)
    } catch {
      return null
    }
    const parsed = RunscStats.safeParse(json)
    const pids = parsed.success ? parsed.data.data.pids?.current : undefined
    return pids === undefined ? null : { pids }
  }

  /** `runsc delete --force` of the container when runsc knows it; INTERNAL when it stays. */
  async delete(id: string): Promise<void> {
    if ((await this.status(id)) === null) return
    const result = await this.#run(['delete', '--force', id])
    if (result.code !== 0 && (await this.status(id)) !== null) {
      throw new RunnerError(
        'INTERNAL',
        `runsc delete --force ${id} failed: ${result.stderr.trim()}; see runsc list --root ${this.#root}`,
      )
    }
  }
}
