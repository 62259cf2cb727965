import type { PROTOCOL_VERSION } from '@conch/protocol'
import { decodeBase64 } from './base64.ts'
import { type ConchError, ConchError as ConchErrorClass, ShellClosedError } from './conch-error.ts'
import { errorFromWire } from './error-from-wire.ts'
import type { OutputFlow } from './output-flow.ts'
import type { RunLedger } from './run-ledger.ts'
import type { IncomingFrame } from './server-frame.ts'
import type { ShellResume } from './shell-resume.ts'
import type { ShellOutput } from './shell-run-options.ts'

// What a shell does with each frame from the runner: output goes to its run (run-ledger.ts) or
// to `onOutput` when no run of this shell owns it, once the part already seen is cut off
// (shell-resume.ts); run starts and exits move runs along; `shell_ready`/`scrollback_end` track
// the attach (the first one resolves `open()`, later ones start reconciliation); error frames
// fail their run or, without one, the attach or the whole shell. Output comes as binary frames,
// or as base64 (or text) inside JSON from a runner without `binary_output`. The client's side of
// the handshake (its version and capabilities) sits here beside the check of the reply.

/** The protocol version this SDK speaks. */
export const SDK_PROTOCOL_VERSION: typeof PROTOCOL_VERSION = 1

/** The `hello` a shell sends on every open; the runner's `hello` in reply is handled below. */
export const CLIENT_HELLO = JSON.stringify({
  type: 'hello',
  protocolVersion: SDK_PROTOCOL_VERSION,
  capabilities: [
    'shell',
    'reattach',
    'interrupt',
    'stdin',
    'base64',
    'heartbeat',
    'pipelining',
    'output_ack',
    'binary_output',
    'start_in_exit',
  ],
})

const textEncoder = new TextEncoder()

/** What the router acts on. */
export interface ShellFrameRouterInit {
  /** The session, for messages. */
  sessionId: string
  /** The sandbox, for messages. */
  sandboxId: string
  /** The shell's runs. */
  ledger: RunLedger
  /** The shell's position in the log. */
  resume: ShellResume
  /** The shell's output flow control. */
  flow: OutputFlow
  /** Where output of no run of this shell goes. */
  onOutput: ((output: ShellOutput) => void) | undefined
  /** Closes the shell for good with `error`. */
  close: (error: ConchError) => void
}

/** What `shell_ready` says of a session restored from a snapshot. */
export interface ShellResumed {
  /** The snapshot the session came from. */
  snapshotId: string
  /** Background processes started again with the sandbox; processes restart, they do not continue. */
  processesRestarted: number
}

/** Routes a shell's incoming frames. */
export class ShellFrameRouter {
  readonly #init: ShellFrameRouterInit
  #attachedOnce = false
  #encoding: 'utf8' | 'base64' = 'base64'
  #resumed: ShellResumed | null = null
  #attach: { resolve: () => void; reject: (err: unknown) => void } | null = null

  /** A router for one shell. */
  constructor(init: ShellFrameRouterInit) {
    this.#init = init
  }

  /** Set once the runner said the session was restored from a snapshot. */
  get resumed(): ShellResumed | null {
    return this.#resumed
  }

  /** Settles when the first attach (with its replay) completes or fails. */
  attached(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#attach = { resolve, reject }
    })
  }

  /** Nobody waits for the attach any more. */
  forgetAttach(): void {
    this.#attach = null
  }

  /** Fails a pending attach with `error`. */
  failAttach(error: unknown): void {
    this.#attach?.reject(error)
    this.#attach = null
  }

  /** Acts on one frame from the runner. */
  frame(frame: IncomingFrame): void {
    switch (frame.type) {
      case 'shell_out':
      case 'shell_err':
        this.output(
          frame.type === 'shell_out' ? 'stdout' : 'stderr',
          frame.id,
          this.#encoding === 'base64' ? decodeBase64(frame.data) : textEncoder.encode(frame.data),
          frame.offset,
        )
        return
      case 'shell_start': {
        this.#init.resume.advance(frame.offset)
        const run = this.#init.ledger.get(frame.id)
        if (run && (run.state === 'sent' || run.state === 'waiting')) this.#init.ledger.started(run)
        return
      }
      case 'shell_exit': {
        // With `startOffset` the exit also stands for the run's start (`start_in_exit`): a run
        // still `sent` ends here, and its start's work (deadline, held stdin) is moot.
        this.#init.resume.advance(frame.offset)
        const run = this.#init.ledger.get(frame.id)
        if (run && run.state !== 'done') this.#init.ledger.finish(run, frame)
        this.#init.resume.runEnded()
        return
      }
      case 'shell_ready': {
        this.#encoding = frame.encoding
        if (frame.resumed !== undefined) this.#resumed = frame.resumed
        this.#init.flow.attached(frame.offset)
        const seen = this.#init.resume.offset
        const skipped = this.#init.resume.attached(frame.offset)
        if (skipped !== null) {
          this.#lose(
            skipped,
            `the runner resumed shell ${this.#init.sessionId} at offset ${skipped}, after ${seen}`,
          )
        }
        const running = frame.running === null ? undefined : this.#init.ledger.get(frame.running)
        if (running && running.state === 'sent') this.#init.ledger.started(running)
        return
      }
      case 'scrollback_end':
        this.#init.resume.advance(frame.offset)
        this.#init.resume.live()
        if (!this.#attachedOnce) {
          this.#attachedOnce = true
          this.#attach?.resolve()
          this.#attach = null
          this.#init.ledger.flush()
        } else void this.#init.resume.reconcile()
        return
      case 'shell_closed':
        this.#init.close(
          new ShellClosedError(
            `shell ${this.#init.sessionId} in sandbox ${this.#init.sandboxId} closed (${frame.reason})`,
            { exitCode: frame.code, signal: frame.signal },
          ),
        )
        return
      case 'error':
        this.#onError(frame)
        return
      case 'pong':
        this.#init.resume.pong(frame.t ?? -1)
        return
      case 'hello':
        this.#init.flow.negotiated(frame.capabilities.includes('output_ack'), this.#init.resume.resumeFrom)
        if (frame.protocolVersion !== SDK_PROTOCOL_VERSION) {
          this.#init.close(
            new ConchErrorClass(
              'UNSUPPORTED_PROTOCOL_VERSION',
              `the runner speaks protocol ${frame.protocolVersion} and this @conch/sdk speaks ${SDK_PROTOCOL_VERSION}; install a matching @conch/sdk`,
            ),
          )
        }
        return
      case 'ping':
        return
    }
  }

  /** Output `[offset, offset + data.length)` of `runId` (or of no run of this shell) arrived. */
  output(stream: 'stdout' | 'stderr', runId: string | null, data: Uint8Array, offset: number): void {
    const bytes = this.#init.resume.unseen(data, offset)
    if (bytes === null) return
    const end = offset + data.length
    const start = end - bytes.length
    const run = runId === null ? undefined : this.#init.ledger.get(runId)
    if (run) {
      this.#init.ledger.output(run, stream, bytes, start, end)
      return
    }
    this.#init.flow.received(end)
    this.#init.onOutput?.({ runId, stream, data: bytes, offset: start })
  }

  #onError(frame: Extract<IncomingFrame, { type: 'error' }>): void {
    const error = errorFromWire(
      {
        code: frame.code,
        message: `shell ${this.#init.sessionId}: ${frame.message}`,
        details: frame.details,
      },
      {},
    )
    const run = frame.id === null ? undefined : this.#init.ledger.get(frame.id)
    if (run) {
      this.#init.ledger.fail(run, error)
      if (run.state !== 'started') this.#init.ledger.forget(run)
      return
    }
    switch (error.code) {
      case 'OUTPUT_LOST': {
        // On the first attach the caller asked for this offset explicitly: say that it is gone
        // instead of silently starting later. On a reconnect, the runs that lost output fail.
        if (!this.#attachedOnce) {
          this.#attach?.reject(error)
          this.#init.close(error)
          return
        }
        const earliest = frame.details?.earliestOffset
        this.#lose(typeof earliest === 'number' ? earliest : this.#init.resume.offset, frame.message, error)
        return
      }
      case 'SESSION_NOT_FOUND':
      case 'SANDBOX_NOT_FOUND':
      case 'UNAUTHORIZED':
      case 'FORBIDDEN':
        this.#init.close(error)
        return
      default:
        if (!this.#attachedOnce) this.#attach?.reject(error)
    }
  }

  /** Output up to `resumeAt` is gone: every run that may have had some fails with OutputLostError. */
  #lose(resumeAt: number, message: string, cause?: unknown): void {
    this.#init.resume.advance(resumeAt)
    this.#init.ledger.lose(resumeAt, message, cause)
  }
}
