// Reading and writing cgroup interface files. Both versions use the same few formats: a single
// value (`memory.current`, `pids.max`), and flat keyed lines of `key value` (`memory.events`,
// `cpu.stat`, `memory.stat`, v1's `memory.oom_control`). A file the kernel does not have (an
// older kernel, a controller that is not enabled) reads as null, never as an error: callers
// decide whether its absence matters.
import { readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { RunnerError } from '../runner-error.ts'

/** The text of `<dir>/<name>`, or null when it does not exist. */
export function readCgroupFile(dir: string, name: string): string | null {
  try {
    return readFileSync(join(dir, name), 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENODEV') return null
    throw error
  }
}

/** A single-number file (`memory.current`), or null when it is missing or holds `max`. */
export function readCgroupNumber(dir: string, name: string): number | null {
  const text = readCgroupFile(dir, name)?.trim()
  if (text === undefined || text === '' || text === 'max') return null
  const n = Number(text)
  return Number.isFinite(n) ? n : null
}

/** Parses flat keyed lines (`oom_kill 3`) into numbers; lines that are not `key number` are left out. */
export function parseKeyed(text: string): Record<string, number> {
  const out: Record<string, number> = {}
  for (const line of text.split('\n')) {
    const [key, value, extra] = line.trim().split(/\s+/)
    if (key === undefined || value === undefined || extra !== undefined) continue
    const n = Number(value)
    if (key && Number.isFinite(n)) out[key] = n
  }
  return out
}

/** The keyed numbers of `<dir>/<name>`; empty when the file is missing. */
export function readKeyed(dir: string, name: string): Record<string, number> {
  const text = readCgroupFile(dir, name)
  return text === null ? {} : parseKeyed(text)
}

/** Writes `value` to `<dir>/<name>`; a refusal names the file and value so the operator can act. */
export function writeCgroupFile(dir: string, name: string, value: string): void {
  try {
    writeFileSync(join(dir, name), value)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    throw new RunnerError(
      'INTERNAL',
      `the kernel refused "${value}" for ${join(dir, name)} (${code}); check that the runner is root and the cgroup controller is available`,
      { cause: error },
    )
  }
}

/** The pids listed in `<dir>/cgroup.procs`; empty when the group is gone. */
export function readProcs(dir: string): number[] {
  const text = readCgroupFile(dir, 'cgroup.procs')
  if (text === null) return []
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map(Number)
}

/** How often an emptied group's removal is tried again while its last tasks finish exiting. */
const REMOVE_RETRY_MS = 10

/**
 * Removes emptied group dirs, leaf first as listed. A group whose cgroup.procs is already empty
 * can still refuse rmdir with EBUSY for a moment: its last tasks are exiting, or are zombies
 * whose parent (the runner, for the sandbox's first process) has not reaped them yet. So EBUSY
 * is tried again, yielding to the event loop, until `timeoutMs`; a dir already gone is fine.
 */
export async function removeCgroupDirs(dirs: readonly string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (const dir of dirs) {
    for (;;) {
      try {
        rmdirSync(dir)
        break
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        if (code === 'ENOENT') break
        if (code !== 'EBUSY' || Date.now() >= deadline) {
          throw new RunnerError(
            'INTERNAL',
            `cannot remove the cgroup ${dir} (${code ?? 'error'}); check for processes left in it (cgroup.procs) or stuck exiting (state D)`,
            { cause: error },
          )
        }
        await new Promise((resolve) => setTimeout(resolve, REMOVE_RETRY_MS))
      }
    }
  }
}
