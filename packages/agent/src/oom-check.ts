// Tells whether an exit code 137 (SIGKILL) was the sandbox's memory limit. The driver binds the
// work cgroup's event file into the sandbox (cgroup v1 `memory.oom_control`, v2 `memory.events`);
// its `oom_kill N` line counts the processes the limit killed. The file is read only when a
// command exits with 137, so commands that exit otherwise cost nothing; a count that grew since
// the previous read means the limit did the killing. One counter serves every session and exec
// of the agent, so each kill is reported once. A kill that ends no run or exec (a background
// process, or a child the command outlives) is only counted, and is reported by the next run or
// exec that exits with 137.
import { readFileSync } from 'node:fs'

/** `$?` of a command killed by SIGKILL, which is how the OOM killer ends a process. */
export const SIGKILL_EXIT_CODE = 137

/** Answers `oomKilled` for a finished command's exit code. */
export type OomCheck = (exitCode: number) => boolean

/** The `oom_kill` count in the text of a cgroup memory event file, or null when it has none. */
export function parseOomKills(text: string): number | null {
  const match = /^oom_kill (\d+)$/m.exec(text)
  return match ? Number(match[1]) : null
}

/**
 * A check that reads `eventsFile` on exit code 137 and answers true when its `oom_kill` count
 * grew since the previous read (the first read is taken now, so earlier kills do not count).
 * Without a file, or when the file cannot be read, every answer is false.
 */
export function oomCheck(eventsFile: string | undefined): OomCheck {
  if (eventsFile === undefined) return () => false
  const read = (): number | null => {
    try {
      return parseOomKills(readFileSync(eventsFile, 'utf8'))
    } catch {
      return null
    }
  }
  let seen = read()
  return (exitCode) => {
    if (exitCode !== SIGKILL_EXIT_CODE) return false
    const now = read()
    if (now === null) return false
    const grew = seen !== null && now > seen
    seen = now
    return grew
  }
}
