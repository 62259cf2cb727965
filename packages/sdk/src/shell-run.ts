import { encodeBase64 } from './base64.ts'
import type { CommandResult } from './command-result.ts'
import type { OutputBuffer } from './output-buffer.ts'
import type { OutputCallback } from './shell-run-options.ts'

// One run of a shell: the record the ledger keeps for it from call to result (run-ledger.ts),
// the `shell_stdin` frame a piped run sends, and how its end becomes the CommandResult it
// resolves with (the callbacks' decoder tails first, then the buffered output).

const EMPTY = new Uint8Array(0)
const textDecoder = new TextDecoder()

/** Where a run is: queued here, on the wire, started by the runner, or ended. */
export type RunState = 'waiting' | 'sent' | 'started' | 'done'

/** One run and everything it collects. */
export interface Run {
  /** The run id, unique on this shell. */
  id: string
  /** Its `shell_run` frame, kept to send again after a reconnect. */
  frame: string
  /** Where it is. */
  state: RunState
  /** Whether callbacks and the result get bytes. */
  binary: boolean
  /** Whether its output is buffered for the result (`run`, not `stream`). */
  keep: boolean
  /** Its own timeout, if it set one. */
  timeoutMs: number | undefined
  /** Buffered stdout. */
  stdout: OutputBuffer | null
  /** Buffered stderr. */
  stderr: OutputBuffer | null
  /** Stdout callback. */
  onStdout: OutputCallback | undefined
  /** Stderr callback. */
  onStderr: OutputCallback | undefined
  /** Settles when the callbacks' pending promises have; null when none is pending. */
  chain: Promise<void> | null
  /** Streaming decoder of stdout for callbacks. */
  outDecoder: InstanceType<typeof TextDecoder> | null
  /** Streaming decoder of stderr for callbacks. */
  errDecoder: InstanceType<typeof TextDecoder> | null
  /** `performance.now()` after which the client stops waiting for the run's end; 0 before it starts. */
  deadlineAt: number
  /** Rejected already; later frames are ignored. */
  abandoned: boolean
  /** `shell_stdin` frames of a piped run written before it started; null once sent. */
  stdinQueue: string[] | null
  /** Resolves the caller's promise. */
  resolve: (result: CommandResult<string | Uint8Array>) => void
  /** Rejects the caller's promise. */
  reject: (error: unknown) => void
}

/** How a run ended, as its `shell_exit` frame reports it. */
export interface RunExit {
  /** The exit code. */
  code: number
  /** Whether its timeout killed it. */
  timedOut: boolean
  /** Whether the OOM killer killed it. */
  oomKilled?: boolean
  /** Its time on the runner. */
  durationMs: number
}

/** The `shell_stdin` frame of a piped run: `data` (if any), and EOF with `end`. */
export function stdinFrame(id: string, data: string | Uint8Array | undefined, end: boolean): string {
  return JSON.stringify({
    type: 'shell_stdin',
    id,
    ...(data === undefined
      ? {}
      : {
          data: encodeBase64(typeof data === 'string' ? new TextEncoder().encode(data) : data),
          encoding: 'base64',
        }),
    ...(end ? { end: true } : {}),
  })
}

/**
 * Resolves an ended run with its result: the decoders' tails go to the callbacks first (a
 * throwing callback rejects the run instead), then the buffered output becomes the result.
 */
export function completeRun(run: Run, exit: RunExit): void {
  if (run.abandoned) return
  try {
    const outTail = run.outDecoder?.decode()
    if (outTail) run.onStdout?.(outTail)
    const errTail = run.errDecoder?.decode()
    if (errTail) run.onStderr?.(errTail)
  } catch (err) {
    run.reject(err)
    return
  }
  const text = !run.binary
  const out = run.stdout?.bytes(text) ?? EMPTY
  const err = run.stderr?.bytes(text) ?? EMPTY
  run.resolve({
    stdout: text ? (out.length ? textDecoder.decode(out) : '') : out,
    stderr: text ? (err.length ? textDecoder.decode(err) : '') : err,
    exitCode: exit.code,
    timedOut: exit.timedOut,
    oomKilled: exit.oomKilled === true,
    truncated: (run.stdout?.truncated ?? false) || (run.stderr?.truncated ?? false),
    durationMs: exit.durationMs,
    stdoutBytes: run.stdout?.totalBytes ?? 0,
    stderrBytes: run.stderr?.totalBytes ?? 0,
  })
}
