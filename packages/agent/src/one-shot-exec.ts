// One command in a fresh `bash -c`, sharing nothing with the sessions' shells.
//
// The child leads its own process group, so a timeout reaches its whole tree: SIGTERM to the
// group, then SIGKILL after the grace period. stdin is /dev/null unless the caller gives bytes,
// which come from a file where the caller can make one (child-stdio.ts), else a socket.
// Output is either buffered (capped per stream) or handed to `onData`, which applies
// backpressure by returning false (the child's pipes pause until `resume` is called).
import type { ChildProcess } from 'node:child_process'
import { closeSync } from 'node:fs'
import type { StreamName } from '@conch/protocol'
import { LIMITS } from '@conch/protocol/zod-free'
import { CappedBytes } from './capped-bytes.ts'
import { exitCodeOf, signalGroup } from './child-exit.ts'
import type { ChildStdio } from './child-stdio.ts'
import type { Clock } from './clock.ts'
import type { Spawn } from './spawner.ts'

const PIPE_DRAIN_MS = 100

/** What to run. */
export interface ExecRequest {
  /** Command text for `bash -c`. */
  command: string
  /** Host working directory. */
  cwd: string
  /** The complete environment of the child. */
  env: Record<string, string>
  /** stdin bytes; /dev/null when absent. */
  stdin?: Buffer
  /** Timeout in ms (already clamped). */
  timeoutMs: number
  /** Per-stream cap of the buffered result. */
  outputCapBytes?: number
  /** Streams output here instead of buffering; return false to pause until `resume()`. */
  onData?: (stream: StreamName, data: Buffer) => boolean
}

/** How an exec ended. */
export interface ExecOutcome {
  /** Exit code, 128+n for signal n. */
  exitCode: number
  /** Whether the timeout stopped it. */
  timedOut: boolean
  /** Wall time. */
  durationMs: number
  /** Buffered stdout (empty when streaming). */
  stdout: CappedBytes
  /** Buffered stderr (empty when streaming). */
  stderr: CappedBytes
}

/** A running exec. */
export interface ExecHandle {
  /** Settles when the child has exited and its pipes are drained. */
  done: Promise<ExecOutcome>
  /** Lets a paused stream flow again. */
  resume(): void
  /** Stops the command early (as a timeout does, but without `timedOut`). */
  cancel(): void
}

/** Starts `bash -c command` with the given spawn function and clock. */
export function startExec(
  request: ExecRequest,
  spawn: Spawn,
  clock: Clock,
  childStdio?: Pick<ChildStdio, 'stdinFile'>,
): ExecHandle {
  const started = clock.monotonicMs()
  const cap = request.outputCapBytes ?? LIMITS.outputCapBytes
  const stdout = new CappedBytes(cap)
  const stderr = new CappedBytes(cap)
  const stdinFd = request.stdin ? (childStdio?.stdinFile(request.stdin) ?? null) : null
  let child: ChildProcess
  try {
    child = spawn('bash', ['-c', request.command], {
      cwd: request.cwd,
      env: request.env,
      detached: true,
      stdio: [stdinFd ?? (request.stdin ? 'pipe' : 'ignore'), 'pipe', 'pipe'],
    })
  } finally {
    if (stdinFd !== null) closeSync(stdinFd)
  }
  let timedOut = false
  let killTimer: unknown
  const stop = (): void => {
    if (child.pid === undefined) return
    signalGroup(child.pid, 'SIGTERM')
    killTimer = clock.setTimer(LIMITS.killGraceMs, () => {
      if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL')
    })
  }
  const timer = clock.setTimer(request.timeoutMs, () => {
    timedOut = true
    stop()
  })
  const pipes = [
    ['stdout', child.stdout, stdout],
    ['stderr', child.stderr, stderr],
  ] as const
  for (const [name, pipe, sink] of pipes) {
    pipe?.on('data', (chunk: Buffer) => {
      if (request.onData) {
        if (!request.onData(name, chunk)) pipe.pause()
      } else {
        sink.append(chunk)
      }
    })
  }
  if (request.stdin && child.stdin) {
    child.stdin.on('error', () => {})
    child.stdin.end(request.stdin)
  }
  const done = new Promise<ExecOutcome>((resolve) => {
    child.on('error', () => {
      clock.clearTimer(timer)
      stderr.append(Buffer.from('bash: could not be started\n'))
      resolve({ exitCode: 127, timedOut, durationMs: clock.monotonicMs() - started, stdout, stderr })
    })
    // A grandchild left in the background may hold the pipes open after bash exits; give the
    // pipes a moment to drain, then stop waiting for them rather than hang the exec.
    child.on('exit', () => {
      clock.setTimer(PIPE_DRAIN_MS, () => {
        child.stdout?.destroy()
        child.stderr?.destroy()
      })
    })
    child.on('close', (code, signal) => {
      clock.clearTimer(timer)
      if (killTimer !== undefined) clock.clearTimer(killTimer)
      resolve({
        exitCode: exitCodeOf(code, signal),
        timedOut,
        durationMs: clock.monotonicMs() - started,
        stdout,
        stderr,
      })
    })
  })
  return {
    done,
    resume: () => {
      child.stdout?.resume()
      child.stderr?.resume()
    },
    cancel: stop,
  }
}
