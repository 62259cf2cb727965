// The warm-up of a pooled sandbox's agent, done before the pool offers the sandbox. A new agent
// is a new Node process: V8 compiles its run path on first use and optimizes it only once it is
// hot, so its first few hundred runs cost 2-3x a warmed agent's (measured with
// `pnpm --filter @conch/agent bench:first-runs`), and those are most of the runs an AI agent's
// sandbox ever does. A pooled sandbox has time to spare: the pool drives runs through the same
// path a client's runs take on the agent's side (a session created by a call, a channel attached
// to it, unbuffered runs whose output and end come back as channel frames), then deletes the
// session; in rounds of a few tens of runs per session, so the whole of a session's life is warm.
//
// No trace reaches the client who takes the sandbox: the session has a shape unlike the spare
// shell's (one extra variable), so the agent starts its own bash for it and keeps the spare; it
// is deleted (its bash and every process of it killed, its files and scrollback dropped) before
// the sandbox enters the pool, so it is never listed; its runs are builtins, so they start no
// process and write no file of the user's. The runner records nothing of it: it calls the agent
// directly, not through the sandbox manager. test/pool-warm-up.test.ts attacks this
// from inside the sandbox a client takes.
import { randomBytes } from 'node:crypto'
import type { AgentLink } from './agent-link.ts'
import type { ChannelEvent } from './runner-channel.ts'

/** Runs of a pooled sandbox's warm-up: past V8's thresholds for the run path's functions. */
export const POOL_WARM_UP_RUNS = 500

/**
 * Pause between two warm-up runs. Unpaced, a refill's warm-up (which starts when a client takes
 * a pooled sandbox) took the CPU from that client's first commands; paced, it takes about a
 * fifth of one core for a second or two.
 */
export const POOL_WARM_UP_PAUSE_MS = 2

/** The warm-up session's only difference from a default session, which keeps the spare out of it. */
const WARM_UP_ENV = { CONCH_WARM_UP: '1' }

/**
 * The commands, in turn: a run without output and one with output on each stream. The word
 * after `:` names them, so a search of a sandbox for any trace of them has a string to look for.
 */
export const WARM_UP_COMMANDS: readonly string[] = [
  '\\builtin : conch-pool-warm-up',
  '\\builtin printf .; \\builtin printf . >&2; \\builtin : conch-pool-warm-up',
]

/**
 * Runs per warm-up session. The warm-up is rounds of a session's whole life (create, attach, runs,
 * detach, delete), not one long session: V8 optimizes the link's call and frame code for what it
 * has seen, and code that saw only runs was measured to deoptimize on a client's first attach.
 */
const RUNS_PER_SESSION = 50

/** How a warm-up goes. */
export interface WarmUpOptions {
  /** Runs in all (default `POOL_WARM_UP_RUNS`). */
  runs?: number
  /** Ends the warm-up early when it returns true (the pool is closing). */
  stop?: () => boolean
  /** Called after each run that ended. */
  onRun?: () => void
}

/**
 * Warms up the agent behind `link` with runs of builtins in sessions of its own, each deleted at
 * its end, also when a run fails. Resolves to the number of runs that ended. Rejects when the
 * agent failed a call or the link or a shell closed under a run; the pool then discards the
 * sandbox as it does one that failed to start.
 */
export async function warmUpAgent(link: AgentLink, options: WarmUpOptions = {}): Promise<number> {
  const { runs = POOL_WARM_UP_RUNS, stop = () => false, onRun = () => {} } = options
  let done = 0
  while (done < runs && !stop()) {
    done += await warmUpSession(link, Math.min(RUNS_PER_SESSION, runs - done), stop, onRun)
  }
  return done
}

/** One warm-up session: created, attached, `runs` runs, detached, deleted. */
async function warmUpSession(
  link: AgentLink,
  runs: number,
  stop: () => boolean,
  onRun: () => void,
): Promise<number> {
  let done = 0
  const sessionId = `warm-up-${randomBytes(8).toString('hex')}`
  await link.call('session.create', { id: sessionId, env: WARM_UP_ENV })
  const channel = link.openChannel()
  try {
    let ended: ((id: string) => void) | null = null
    // A channel that ends under a run (the agent died, or the link or the shell closed) fails it.
    let lost: ((error: Error) => void) | null = null
    channel.onClose(() => lost?.(new Error('the warm-up channel closed under a run')))
    channel.consume((event: ChannelEvent, payload: Uint8Array) => {
      if (event.type === 'shell_out' || event.type === 'shell_err') {
        event.lease?.release()
        channel.release(payload.byteLength)
      } else if (event.type === 'shell_exit') ended?.(event.id)
    })
    await link.call('session.attach', { sessionId, ch: channel.id })
    for (let i = 0; i < runs && !stop(); i++) {
      const id = `w${i}`
      const exited = new Promise<void>((resolve, reject) => {
        ended = (endedId) => {
          if (endedId === id) resolve()
        }
        lost = reject
      })
      const command = WARM_UP_COMMANDS[i % WARM_UP_COMMANDS.length]!
      await Promise.all([link.call('session.run', { sessionId, id, command, buffer: false }), exited])
      done += 1
      onRun()
      await new Promise((resolve) => setTimeout(resolve, POOL_WARM_UP_PAUSE_MS))
    }
  } finally {
    channel.close()
    await link.call('session.delete', { sessionId })
  }
  return done
}
