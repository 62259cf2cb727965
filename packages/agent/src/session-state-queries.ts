// The state of a session's shell read and changed as data: its exported variables, aliases and
// cwd (`session.env.*`, `session.alias.*`, snapshots). Each query is an internal run: queued like
// any run, kept out of the output log and the history, and it leaves `$?` as it was. A query ends
// by restoring `$?`, so its own failure shows only as a message on stderr, which becomes
// BAD_REQUEST.
import { LIMITS } from '@conch/protocol/zod-free'
import { AgentError } from './agent-error.ts'
import type { BashSession } from './bash-session.ts'
import { shellQuote } from './framing-lines.ts'

/** Reads and changes the state of sessions' shells through internal runs. */
export class SessionStateQueries {
  #runs = 0

  /** The exported variables of a session's shell. */
  async env(session: BashSession): Promise<Record<string, string>> {
    return parsePairs(await this.#run(session, session.helperName('env')))
  }

  /** Exports `name` with `value` (which holds no NUL byte) in a session's shell. */
  async setEnv(session: BashSession, name: string, value: string): Promise<void> {
    await this.#run(session, `\\builtin export ${name}=${shellQuote(value)}`)
  }

  /** Unsets the variable `name` in a session's shell. */
  async unsetEnv(session: BashSession, name: string): Promise<void> {
    await this.#run(session, `\\builtin unset -v ${name}`)
  }

  /** The aliases of a session's shell. */
  async aliases(session: BashSession): Promise<Record<string, string>> {
    return parsePairs(await this.#run(session, session.helperName('alias')))
  }

  /** Defines the alias `name` as `value` in a session's shell. */
  async addAlias(session: BashSession, name: string, value: string): Promise<void> {
    await this.#run(session, `\\builtin alias ${name}=${shellQuote(value)}`)
  }

  /** Removes the alias `name` from a session's shell; NOT_FOUND when it has none of that name. */
  async removeAlias(session: BashSession, name: string): Promise<void> {
    const aliases = await this.aliases(session)
    if (!Object.hasOwn(aliases, name)) {
      throw new AgentError(
        'NOT_FOUND',
        `session "${session.id}" has no alias "${name}"; list aliases to see them.`,
      )
    }
    await this.#run(session, `\\builtin unalias ${shellQuote(name)}`)
  }

  /** The cwd and exported variables of a session's shell. */
  async shellState(session: BashSession): Promise<{ cwd: string; env: Record<string, string> }> {
    const out = await this.#run(session, `\\builtin printf '%s\\0' "$PWD"; ${session.helperName('env')}`)
    const nul = out.indexOf(0)
    const cwd = out.subarray(0, nul).toString()
    return { cwd, env: parsePairs(out.subarray(nul + 1)) }
  }

  /** Runs a state query in the shell and returns its stdout; stderr output is BAD_REQUEST. */
  async #run(session: BashSession, command: string): Promise<Buffer> {
    this.#runs += 1
    const out = await session.run({
      runId: `__conch_internal_${this.#runs}`,
      command,
      internal: true,
      timeoutMs: LIMITS.defaultCommandTimeoutMs,
    })
    if (out.stderr.length > 0) {
      throw new AgentError(
        'BAD_REQUEST',
        `session "${session.id}" refused the change: ${out.stderr.toString().trim()}`,
      )
    }
    return out.stdout
  }
}

/** Parses `name=value\0` records. */
export function parsePairs(bytes: Buffer): Record<string, string> {
  const out: Record<string, string> = {}
  for (const record of bytes.toString().split('\0')) {
    const eq = record.indexOf('=')
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1)
  }
  return out
}
