// The agent's spare shell: one bash started with the default options before any session asks
// for it, held outside the sessions (not listed, not counted against the session limit, not in
// snapshots). The first new session whose options build the same shell takes it under its own
// id and so does not wait for a bash to start; any other starts its own. No spare replaces a
// taken one, and one that died is never handed out.
//
// Once bash is ready, the spare runs one warm-up: an internal run (kept out of the log and the
// history, and ending with `$?` set back to 0) that prints a byte on each stream and sets
// nothing. It takes the first run's one-time costs off the user's first run: bash's first
// source of a command file, and, in the agent, the first pass through the run, file, marker and
// output code, which a new agent process has not compiled yet. A session that takes the spare
// before the warm-up ended queues its first run behind it.
import { randomBytes } from 'node:crypto'
import type { BashSession } from './bash-session.ts'

/**
 * The warm-up's command: builtins only (no process to start), an output byte per stream, no
 * variable, alias or function left behind. Leading backslashes keep aliases away.
 */
export const WARM_UP_COMMAND = '\\builtin printf .; \\builtin printf . >&2'
/** The warm-up's timeout: far above what it takes, only so that it can never hang the spare. */
const WARM_UP_TIMEOUT_MS = 10_000

/** What distinguishes one new shell from another, besides its id. */
export interface ShellShape {
  /** The complete starting environment. */
  env: Record<string, string>
  /** The starting directory. */
  cwd: string
  /** Whether the environment started empty. */
  cleanEnv: boolean
  /** Default timeout of its runs. */
  commandTimeoutMs: number
}

/** Whether two shells would start alike: same environment (names and values), directory, options. */
export function sameShape(a: ShellShape, b: ShellShape): boolean {
  if (a.cwd !== b.cwd || a.cleanEnv !== b.cleanEnv || a.commandTimeoutMs !== b.commandTimeoutMs) return false
  const names = Object.keys(a.env)
  if (names.length !== Object.keys(b.env).length) return false
  return names.every((name) => Object.hasOwn(b.env, name) && a.env[name] === b.env[name])
}

/** Holds at most one spare shell until a session of its shape takes it. */
export class SpareShell {
  #spare: { session: BashSession; shape: ShellShape } | null = null

  /** bash's pid in the spare shell, while there is one. */
  get pid(): number | null {
    return this.#spare?.session.pid ?? null
  }

  /** Whether a spare is held (running or starting). */
  get held(): boolean {
    return this.#spare !== null
  }

  /** Holds `session`, started with `shape`; a spare that closes before it is taken is dropped. */
  hold(session: BashSession, shape: ShellShape): void {
    const spare = { session, shape }
    this.#spare = spare
    // A shell that closes first rejects the warm-up, which is then moot.
    session.ready
      .then(() =>
        session.run({
          runId: `__conch_warm_up_${randomBytes(6).toString('hex')}`,
          command: WARM_UP_COMMAND,
          internal: true,
          timeoutMs: WARM_UP_TIMEOUT_MS,
        }),
      )
      .catch(() => {})
    void session.closed.then(() => {
      if (this.#spare !== spare) return
      this.#spare = null
      session.log.release()
    })
  }

  /** The spare as session `id`, when it is open and `shape` is the shell it was started as. */
  take(id: string, shape: ShellShape): BashSession | null {
    const spare = this.#spare
    if (spare === null || !spare.session.open || !sameShape(spare.shape, shape)) return null
    this.#spare = null
    spare.session.adopt(id)
    return spare.session
  }

  /** Gives up the spare (for the caller to dispose), or null. */
  release(): BashSession | null {
    const session = this.#spare?.session ?? null
    this.#spare = null
    return session
  }
}
