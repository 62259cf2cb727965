// The agent channel's events of one shell socket, forwarded to its client. The link uses the
// WebSocket's names and fields, so each event maps to the frame of the same name; what is done
// here is the run id shown to this client, output decoding (through `shell-output-relay.ts`),
// a short run's start folded into its exit (`shell-start-fold.ts`), and the runner's own
// bookkeeping of ended runs, which waits until the tick's frames are written: the client learns
// of an exit before the runner frees the run's id and queue slot and counts it.
import type { AgentShellExit, ShellExit } from '@conch/protocol'
import type { ChannelEvent } from './runner-channel.ts'
import type { RunnerContext } from './runner-context.ts'
import type { OwnRun, ShellClientRuns } from './shell-client-runs.ts'
import { shellExitJson } from './shell-exit-json.ts'
import type { ShellFrameSender } from './shell-frame-sender.ts'
import type { ShellOutputRelay } from './shell-output-relay.ts'
import type { ShellRunRequests } from './shell-run-requests.ts'
import type { ShellSessionRegistry } from './shell-session-registry.ts'
import type { ShellStartFold } from './shell-start-fold.ts'

/** What the forwarder sends with and keeps books in: the parts of one shell connection. */
export interface ShellEventForwarderOptions {
  /** The runner. */
  ctx: RunnerContext
  /** The sandbox's id. */
  sandboxId: string
  /** Socket counts and in-flight run ids shared by every shell socket of the runner. */
  sessions: ShellSessionRegistry
  /** The connection's frame sender. */
  sender: ShellFrameSender
  /** The connection's output relay. */
  output: ShellOutputRelay
  /** The connection's run starts, folded into their exits. */
  starts: ShellStartFold
  /** The client's runs in flight. */
  runs: ShellClientRuns
  /** The connection's run requests (told when the shell closed). */
  requests: ShellRunRequests
  /** Closes the socket with `code` and `reason` (after an error frame). */
  close: (code: number, reason: string) => void
}

/** Forwards one shell socket's channel events to its client. */
export class ShellEventForwarder {
  readonly #ctx: RunnerContext
  readonly #sandboxId: string
  readonly #sessions: ShellSessionRegistry
  readonly #sender: ShellFrameSender
  readonly #output: ShellOutputRelay
  readonly #starts: ShellStartFold
  readonly #runs: ShellClientRuns
  readonly #requests: ShellRunRequests
  readonly #close: (code: number, reason: string) => void

  /** A forwarder over the parts of one connection. */
  constructor(options: ShellEventForwarderOptions) {
    this.#ctx = options.ctx
    this.#sandboxId = options.sandboxId
    this.#sessions = options.sessions
    this.#sender = options.sender
    this.#output = options.output
    this.#starts = options.starts
    this.#runs = options.runs
    this.#requests = options.requests
    this.#close = options.close
  }

  /**
   * The runs whose exit this tick forwarded, as pairs (the exit, the client's own run or
   * undefined): their bookkeeping waits for the tick's write (`afterWrite`).
   */
  readonly #ended: (AgentShellExit | OwnRun | undefined)[] = []

  /**
   * The tick's frames are written: frees each ended run's id and queue slot and counts it (own
   * runs), or frees another client's run's id.
   */
  afterWrite(): void {
    // Nothing here sends a frame or ends a run, so the list does not change while it is read.
    const ended = this.#ended
    for (let i = 0; i < ended.length; i += 2) {
      const event = ended[i] as AgentShellExit
      const own = this.#runs.forget(event.id, ended[i + 1] as OwnRun | undefined)
      if (own) this.#ctx.metrics.shellRunEnded(event.timedOut, (performance.now() - own.started) / 1000)
      else this.#runs.releaseForeign(event.id)
    }
    ended.length = 0
  }

  /** The id this client sees for link run `run` (see `ShellClientRuns.shownId`). */
  readonly #shownId = (run: string | null): string | null => this.#runs.shownId(run)

  /** Forwards one event of the agent's channel to the client. */
  forward(event: ChannelEvent): void {
    switch (event.type) {
      case 'shell_out':
      case 'shell_err':
        this.#starts.flush()
        this.#output.output(event, this.#shownId)
        return
      case 'shell_start': {
        const id = this.#runs.shownId(event.id)
        if (id) this.#starts.start(event.id, id, event.offset)
        return
      }
      case 'shell_exit': {
        this.#output.flushAll()
        const startOffset = this.#starts.takeFor(event.id)
        const own = this.#runs.own(event.id)
        const id = own ? own.clientId : this.#runs.shownId(event.id)
        if (id) {
          const exit: ShellExit = {
            type: 'shell_exit',
            id,
            code: event.code,
            timedOut: event.timedOut,
            durationMs: event.durationMs,
            offset: event.offset,
          }
          if (event.oomKilled === true) exit.oomKilled = true
          if (startOffset !== undefined) exit.startOffset = startOffset
          this.#sender.sendData(shellExitJson(exit))
        }
        // The sender writes this tick's frames at its end, then calls `afterWrite`: the client
        // learns of the exit before the runner frees the run's id and slot and counts it.
        this.#ended.push(event, own)
        this.#sender.atEndOfTick()
        return
      }
      case 'scrollback_end':
        this.#starts.flush()
        this.#sender.send({ type: 'scrollback_end', offset: event.offset })
        return
      case 'shell_closed': {
        this.#starts.flush()
        this.#output.flushAll()
        const sessionId = this.#runs.sessionId
        this.#requests.closed = {
          code: 'SHELL_CLOSED',
          message: `session ${sessionId} is closed: ${event.reason}`,
        }
        this.#sender.send({
          type: 'shell_closed',
          code: event.code,
          signal: event.signal,
          reason: event.reason,
        })
        this.#runs.forgetAll(() => this.#ctx.metrics.runs.inc({ via: 'shell', outcome: 'closed' }))
        if (sessionId) this.#sessions.dropDetached(this.#sandboxId, sessionId)
        return
      }
      case 'data':
      case 'end':
        return
      case 'error': {
        this.#starts.flush()
        this.#ctx.metrics.errors.inc({ code: event.error.code })
        this.#sender.send({ type: 'error', id: null, ...event.error })
        this.#close(1011, event.error.code)
        return
      }
    }
  }
}
