// A shell client's requests about runs, made into agent calls: `shell_run` (checked, given a
// link id and a slot in the sandbox's run queue, then queued in the agent as a streamed run
// whose output and exit flow on the socket's channel), `shell_stdin` for one of the client's
// runs in flight, and `shell_interrupt`. A request the runner or the agent refuses gets an
// error frame under the client's run id.
import type { AgentParams, ShellInterrupt, ShellRun, ShellStdin, WireError } from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import { z } from 'zod'
import type { AgentLink } from './agent-link.ts'
import { checkCommand, clampCallTimeout, stdinToBase64 } from './run-input.ts'
import type { RunnerContext } from './runner-context.ts'
import { RunnerError, toRunnerError } from './runner-error.ts'
import type { SandboxRuntime } from './sandbox-manager.ts'
import type { OwnRun, ShellClientRuns } from './shell-client-runs.ts'
import type { ShellFrameSender } from './shell-frame-sender.ts'

/** A streamed run's call answers `{}` once queued; parsing only that keeps the hot path lean. */
const STREAMED_RUN = { result: z.object({}) }

/** What the requests of one socket go through. */
export interface ShellRunRequestsOptions {
  ctx: RunnerContext
  sandbox: SandboxRuntime
  log: FastifyBaseLogger
  runs: ShellClientRuns
  sender: ShellFrameSender
}

/** Makes one socket's run requests into agent calls; `attached` first. */
export class ShellRunRequests {
  readonly #o: ShellRunRequestsOptions
  #link: AgentLink | null = null
  #sessionId: string | null = null
  /** Set once the shell closed: every later run gets this error. */
  closed: WireError | null = null

  /** Requests of the socket these options describe. */
  constructor(options: ShellRunRequestsOptions) {
    this.#o = options
  }

  /** The session is attached on `link`: requests go there from now on. */
  attached(link: AgentLink, sessionId: string): void {
    this.#link = link
    this.#sessionId = sessionId
  }

  /** Queues a run in the agent, or answers why not. */
  run(frame: ShellRun): void {
    const { ctx, runs, sender } = this.#o
    if (this.closed) {
      sender.sendError(frame.id, this.closed.code, this.closed.message)
      return
    }
    if (runs.linkId(frame.id) !== undefined) {
      sender.sendError(
        frame.id,
        'BAD_REQUEST',
        `run id ${frame.id} is already in flight on this connection; use a new id for each run`,
      )
      return
    }
    let stdin: string | undefined
    try {
      checkCommand(frame.command, ctx.limits)
      stdin = stdinToBase64(frame.stdin, frame.stdinEncoding)
      if (frame.stdinPipe === true && stdin !== undefined) {
        throw new RunnerError('BAD_REQUEST', 'give stdin data or stdinPipe, not both')
      }
      // The slot is freed when the run table forgets the run (its exit, a failure, the socket's end).
      this.#o.sandbox.reserveRun(ctx.limits.maxQueuedRunsPerSandbox)
    } catch (error) {
      this.#failure(frame.id, error)
      return
    }
    const run = runs.claim(frame.id)
    const params: AgentParams<'session.run'> = {
      sessionId: this.#sessionId!,
      id: run.runId,
      command: frame.command,
      timeoutMs: clampCallTimeout(frame.timeoutMs, ctx.limits),
      stdin,
      buffer: false,
    }
    if (frame.stdinPipe === true) params.stdinPipe = true
    this.#link!.callUnawaited('session.run', params, this.#runFailed, STREAMED_RUN, run)
  }

  /** A queued run's call failed (the agent refused it, or the link went): one handler for every run. */
  readonly #runFailed = (error: Error, run: OwnRun): void => {
    this.#o.runs.forget(run.runId)
    this.#failure(run.clientId, error)
  }

  /** Forwards input for one of this client's runs to its stdin pipe. */
  stdin(frame: ShellStdin): void {
    const run = this.#o.runs.linkId(frame.id)
    if (run === undefined) {
      this.#o.sender.sendError(
        frame.id,
        'BAD_REQUEST',
        `run id ${frame.id} is not in flight on this connection`,
      )
      return
    }
    let data: string | undefined
    try {
      data = stdinToBase64(frame.data, frame.encoding)
    } catch (error) {
      this.#failure(frame.id, error)
      return
    }
    this.#link
      ?.call('session.stdin', {
        sessionId: this.#sessionId!,
        id: run,
        ...(data === undefined ? {} : { data }),
        ...(frame.end === true ? { end: true } : {}),
      })
      .catch((error) => this.#failure(frame.id, error))
  }

  /** Interrupts the client's run `frame.id` (its link id), another's by its id, or whatever runs. */
  interrupt(frame: ShellInterrupt): void {
    const run = frame.id === undefined ? undefined : (this.#o.runs.linkId(frame.id) ?? frame.id)
    this.#link
      ?.call('session.interrupt', { sessionId: this.#sessionId!, ...(run ? { id: run } : {}) })
      .catch((error) => this.#failure(frame.id ?? null, error))
  }

  #failure(id: string | null, error: unknown): void {
    const e = toRunnerError(error)
    if (e.code === 'INTERNAL') this.#o.log.error({ err: error }, 'shell request failed')
    this.#o.sender.sendError(id, e.code, e.message, e.details)
  }
}
