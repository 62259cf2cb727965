// Which frames about a streamed run may go lazily on the runner link.
//
// A lazy frame waits in the link endpoint for the next frame and leaves with it in one write
// (`LinkEndpoint.send`'s `lazy`). A streamed run's `{}` result only says it was queued, and its
// `shell_start` is news nobody waits for, so both go lazily: a short run's start leaves with its
// exit. The exception is a run with a stdin pipe: its client holds the input until it sees the
// start, so that start goes at once. This file keeps the set of such runs between the call that
// asks for the pipe and the frame that starts (or fails, or ends) the run.
import type { AnswerFrame, CallFrame } from '@conch/link'
import type { AgentFrame } from '@conch/protocol'

/** A `session.run` call that asked for a streamed run (`buffer: false`). */
export interface StreamedRun {
  /** The run id. */
  id: string
  /** Whether the run has a stdin pipe (its start must not wait). */
  piped: boolean
}

/** Decides, per frame, whether a run's frames may wait for the next frame (one per connection). */
export class RunFramePacing {
  /** Runs with a stdin pipe asked for and not started yet, whose start is not lazy. */
  readonly #pipedRuns = new Set<string>()

  /** Notes an incoming call; returns its streamed run, or null when it is not one. */
  called(frame: CallFrame): StreamedRun | null {
    const run = frame.method === 'session.run' ? streamedRun(frame.params) : null
    if (run?.piped) this.#pipedRuns.add(run.id)
    return run
  }

  /** Whether the answer to a call of `run` (from `called`) may go lazily. */
  answerIsLazy(run: StreamedRun | null, answer: AnswerFrame): boolean {
    if (run?.piped && answer.type === 'fail') this.#pipedRuns.delete(run.id)
    return run !== null && answer.type === 'result'
  }

  /** Whether an outgoing frame may go lazily: a run's start, unless its run has a stdin pipe. */
  frameIsLazy(frame: AgentFrame): boolean {
    let lazy = false
    if (frame.type === 'shell_start') lazy = !this.#pipedRuns.delete(frame.id)
    else if (frame.type === 'shell_exit') this.#pipedRuns.delete(frame.id)
    return lazy
  }
}

/** A `session.run`'s run id and stdin pipe when its params ask for a streamed run (`buffer: false`). */
function streamedRun(params: unknown): StreamedRun | null {
  if (typeof params !== 'object' || params === null) return null
  const { buffer, id, stdinPipe } = params as { buffer?: unknown; id?: unknown; stdinPipe?: unknown }
  if (buffer !== false || typeof id !== 'string') return null
  return { id, piped: stdinPipe === true }
}
