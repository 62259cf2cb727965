import { encodeBase64 } from './base64.ts'
import type { CommandResult } from './command-result.ts'
import { DeadlineError, OutputLostError } from './conch-error.ts'
import { OutputBuffer } from './output-buffer.ts'
import type { OutputFlow } from './output-flow.ts'
import { commandDeadlineMs, stdinFields } from './run-budget.ts'
import { completeRun, type Run, type RunExit, stdinFrame } from './shell-run.ts'
import type { OutputCallback, StartOptions } from './shell-run-options.ts'

// The runs of one shell, from call to result. Each run gets an id and its `shell_run` frame,
// waits in the outbox until the shell can send (runs go out in call order), and ends exactly
// once: resolved with its result, or rejected (abort, error frame, deadline, lost output, the
// shell closing). Output of a run goes to its buffers (for the result, capped) and its
// callbacks (decoded per stream); a callback that returns a promise holds later output back,
// and the flow acknowledges it only once consumed. A started run whose end does not come within
// its timeout plus a grace period fails with DeadlineError (one sweep timer per shell). The
// record of one run, its stdin frames and its result are in shell-run.ts.

/** What the ledger needs from its shell. */
export interface RunLedgerInit {
  /** The session, for messages. */
  sessionId: string
  /** Cap of each buffered stream. */
  maxOutputBytes: number
  /** Time a started run gets beyond its timeout. */
  graceMs: number
  /** The shell's output flow control. */
  flow: OutputFlow
  /** Sends a frame now; false when no socket is open. */
  send: (frame: string) => boolean
  /** Whether runs may go on the wire now. */
  canSend: () => boolean
  /** The session's command timeout, as last reported. */
  sessionTimeoutMs: () => number
}

/** The runs of one shell and its outbox. */
export class RunLedger {
  readonly #init: RunLedgerInit
  readonly #prefix = Math.random().toString(36).slice(2, 8)
  readonly #runs = new Map<string, Run>()
  #outbox: Run[] = []
  #seq = 0
  #sweep: ReturnType<typeof setInterval> | undefined

  /** A ledger for one shell. */
  constructor(init: RunLedgerInit) {
    this.#init = init
  }

  /** The run with this id, while it has not ended. */
  get(id: string): Run | undefined {
    return this.#runs.get(id)
  }

  /** Every run that has not ended. */
  runs(): IterableIterator<Run> {
    return this.#runs.values()
  }

  /** Ends the run's bookkeeping (it is rejected or resolved elsewhere). */
  forget(run: Run): void {
    run.state = 'done'
    this.#runs.delete(run.id)
  }

  /**
   * Registers a run and sends it now if the shell can, else queues it in the outbox. `keep`
   * buffers its output for the result; `closed` (the shell's end) rejects it at once.
   */
  start(
    command: string,
    options: StartOptions,
    keep: boolean,
    closed: unknown,
  ): { id: string; promise: Promise<CommandResult<string | Uint8Array>> } {
    const id = `${this.#prefix}.${++this.#seq}`
    if (closed) return { id, promise: Promise.reject(closed) }
    const signal = options.signal
    if (signal?.aborted) return { id, promise: Promise.reject(signal.reason) }
    // The id is [a-z0-9.] only, so the common frame is built without an intermediate object.
    const frame =
      options.stdin === undefined && options.timeoutMs === undefined && options.stdinPipe !== true
        ? `{"type":"shell_run","id":"${id}","command":${JSON.stringify(command)}}`
        : JSON.stringify({
            type: 'shell_run',
            id,
            command,
            timeoutMs: options.timeoutMs,
            ...stdinFields(options.stdin, encodeBase64),
            ...(options.stdinPipe === true ? { stdinPipe: true } : {}),
          })
    let run!: Run
    const promise = new Promise<CommandResult<string | Uint8Array>>((resolve, reject) => {
      run = {
        id,
        frame,
        state: 'waiting',
        binary: options.binary,
        keep,
        timeoutMs: options.timeoutMs,
        stdout: null,
        stderr: null,
        onStdout: options.onStdout,
        onStderr: options.onStderr,
        chain: null,
        outDecoder: null,
        errDecoder: null,
        deadlineAt: 0,
        abandoned: false,
        stdinQueue: [],
        resolve,
        reject,
      }
    })
    if (signal) {
      const onAbort = () => {
        if (run.state === 'done') return
        if (run.state === 'waiting') this.#outbox = this.#outbox.filter((r) => r !== run)
        else this.#init.send(JSON.stringify({ type: 'shell_interrupt', id }))
        this.fail(run, signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      promise.then(
        () => signal.removeEventListener('abort', onAbort),
        () => signal.removeEventListener('abort', onAbort),
      )
    }
    this.#runs.set(id, run)
    if (this.#init.canSend() && this.#outbox.length === 0 && this.#init.send(frame)) run.state = 'sent'
    else this.#outbox.push(run)
    return { id, promise }
  }

  /** Sends queued runs in order while the shell can send. */
  flush(): void {
    while (this.#outbox.length > 0 && this.#init.canSend()) {
      const run = this.#outbox[0]
      if (!run) break
      if (run.state !== 'waiting') {
        this.#outbox.shift()
        continue
      }
      if (!this.#init.send(run.frame)) break
      run.state = 'sent'
      this.#outbox.shift()
    }
  }

  /** Output `[start, end)` of `run` arrived: it goes to the run's buffers and callbacks. */
  output(run: Run, stream: 'stdout' | 'stderr', bytes: Uint8Array, start: number, end: number): void {
    if (run.state === 'done' || bytes.length === 0) {
      this.#init.flow.received(end)
      return
    }
    if (run.state !== 'started') this.started(run)
    if (run.keep) {
      if (stream === 'stdout') {
        run.stdout ??= new OutputBuffer(this.#init.maxOutputBytes)
        run.stdout.push(bytes)
      } else {
        run.stderr ??= new OutputBuffer(this.#init.maxOutputBytes)
        run.stderr.push(bytes)
      }
    }
    const callback = stream === 'stdout' ? run.onStdout : run.onStderr
    if (!callback) {
      this.#init.flow.received(end)
      return
    }
    if (!run.binary) {
      let decoder: InstanceType<typeof TextDecoder>
      if (stream === 'stdout') {
        run.outDecoder ??= new TextDecoder()
        decoder = run.outDecoder
      } else {
        run.errDecoder ??= new TextDecoder()
        decoder = run.errDecoder
      }
      // Text goes out in pieces of at most 64 KiB: a longer string is born in V8's large-object
      // space, which only a full GC frees (measured: 4x the CPU per MiB).
      for (let at = 0; at < bytes.length; at += 65_536) {
        const to = Math.min(bytes.length, at + 65_536)
        const text = decoder.decode(bytes.subarray(at, to), { stream: true })
        if (text) this.#deliver(run, callback, text, start + at, start + to)
        else this.#init.flow.received(start + to)
      }
      return
    }
    this.#deliver(run, callback, bytes, start, end)
  }

  /**
   * Hands a chunk to a run's callback. While a promise a callback returned is pending, later
   * chunks wait behind it and stay held, so the runner stops once a window is unconsumed.
   */
  #deliver(run: Run, callback: OutputCallback, chunk: string | Uint8Array, start: number, end: number): void {
    const call = (): unknown => {
      try {
        return callback(chunk)
      } catch (err) {
        this.fail(run, err)
        return undefined
      }
    }
    let pending: Promise<void>
    if (run.chain) {
      pending = run.chain.then(call).then(() => undefined)
    } else {
      const returned = call()
      if (!isPromiseLike(returned)) {
        this.#init.flow.received(end)
        return
      }
      pending = Promise.resolve(returned).then(() => undefined)
    }
    const release = this.#init.flow.hold(start, end)
    const chain: Promise<void> = pending.then(
      () => {
        release()
        if (run.chain === chain) run.chain = null
      },
      (err: unknown) => {
        release()
        if (run.chain === chain) run.chain = null
        this.fail(run, err)
      },
    )
    run.chain = chain
  }

  /**
   * Input for a piped run: sent at once when it has started, else when it starts (the runner
   * takes input only for a running command).
   */
  stdin(id: string, data: string | Uint8Array | undefined, end: boolean): void {
    const run = this.#runs.get(id)
    if (!run || run.state === 'done') return
    const frame = stdinFrame(id, data, end)
    if (run.stdinQueue) run.stdinQueue.push(frame)
    else this.#init.send(frame)
  }

  /** The run left the runner's queue: its client-side deadline starts. */
  started(run: Run): void {
    run.state = 'started'
    const queued = run.stdinQueue
    run.stdinQueue = null
    for (const frame of queued ?? []) this.#init.send(frame)
    run.deadlineAt =
      performance.now() + commandDeadlineMs(run.timeoutMs, this.#init.sessionTimeoutMs(), this.#init.graceMs)
    // One sweep per shell instead of a timer per run keeps the hot path to a field write.
    if (this.#sweep === undefined) {
      this.#sweep = setInterval(
        () => this.#sweepDeadlines(),
        Math.min(1_000, Math.max(10, this.#init.graceMs / 2)),
      )
      ;(this.#sweep as { unref?: () => void }).unref?.()
    }
  }

  #sweepDeadlines(): void {
    const now = performance.now()
    for (const run of this.#runs.values()) {
      if (run.state !== 'started' || run.abandoned || now < run.deadlineAt) continue
      this.fail(
        run,
        new DeadlineError(
          `run ${run.id} on shell ${this.#init.sessionId} passed its timeout plus ${this.#init.graceMs} ms and the runner ` +
            'never reported its end; the runner may be stuck: interrupt the shell or open a new one',
        ),
      )
    }
  }

  /** The run ended: resolves it with its result once its callbacks have taken their output. */
  finish(run: Run, exit: RunExit): void {
    run.state = 'done'
    this.#runs.delete(run.id)
    if (run.abandoned) return
    if (run.chain) {
      void run.chain.then(() => completeRun(run, exit))
      return
    }
    completeRun(run, exit)
  }

  /** Rejects a run; its later frames are ignored. */
  fail(run: Run, error: unknown): void {
    if (run.abandoned) return
    run.abandoned = true
    if (run.state === 'waiting') {
      run.state = 'done'
      this.#runs.delete(run.id)
    }
    run.reject(error)
  }

  /** Output up to `resumeAt` is gone: every run that may have had some fails with OutputLostError. */
  lose(resumeAt: number, message: string, cause?: unknown): void {
    const details = { earliestOffset: resumeAt }
    for (const run of this.#runs.values()) {
      if (run.state === 'started' || run.state === 'sent') {
        this.fail(
          run,
          new OutputLostError(
            `run ${run.id} on shell ${this.#init.sessionId} lost output while disconnected (${message})`,
            { cause, details },
          ),
        )
        run.state = 'done'
        this.#runs.delete(run.id)
      }
    }
  }

  /** Rejects every run with `error` and stops the deadline sweep (the shell closed). */
  failAll(error: unknown): void {
    clearInterval(this.#sweep)
    for (const run of this.#runs.values()) this.fail(run, error)
    this.#runs.clear()
    this.#outbox = []
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === 'object' && value !== null && typeof (value as PromiseLike<unknown>).then === 'function'
  )
}
