import type { OutputEncoding, OutputOf } from './command-result.ts'

// What a caller passes to a shell run and what a stream yields: the public option and event
// types of `sh.run` and `sh.stream`, and their resolved internal form.

/**
 * Options of one `sh.run`.
 *
 * @example
 * ```ts
 * const ac = new AbortController()
 * const r = await sh.run('npm test', { timeoutMs: 60_000, signal: ac.signal, onStdout: (s) => ui.append(s) })
 * ```
 */
export interface ShellRunOptions<E extends OutputEncoding = 'utf8'> {
  /** Timeout; the runner clamps it between 1 s and its maximum. Default: the session's. */
  timeoutMs?: number
  /**
   * Data for the command's stdin; without it stdin is /dev/null. `'pipe'` makes stdin a pipe
   * you feed while the run is in flight: `run` then returns a `PipedRun` with `write` and `end`
   * (to send the four letters "pipe" as data, pass them as a Uint8Array).
   */
  stdin?: string | Uint8Array
  /** Aborts the run: it is interrupted (Ctrl-C) and the call rejects with the signal's reason. */
  signal?: AbortSignal
  /** `utf8` text (default) or `binary` bytes, lossless. */
  encoding?: E
  /**
   * Called with each stdout chunk as it arrives (whole characters in text mode). A returned
   * promise holds back later chunks, and the command with them, until it settles.
   */
  onStdout?: (chunk: OutputOf<E>) => unknown
  /** Called with each stderr chunk as it arrives; a returned promise holds back later chunks. */
  onStderr?: (chunk: OutputOf<E>) => unknown
}

/**
 * One event of `sh.stream`: output chunks in arrival order, then exactly one `exit`.
 *
 * @example
 * ```ts
 * for await (const ev of sh.stream('make')) {
 *   if (ev.type === 'exit') console.log('exit', ev.exitCode)
 *   else process.stdout.write(ev.data)
 * }
 * ```
 */
export type ShellEvent<T extends string | Uint8Array = string> =
  | { type: 'stdout'; data: T }
  | { type: 'stderr'; data: T }
  | { type: 'exit'; exitCode: number; timedOut: boolean; oomKilled: boolean; durationMs: number }

/**
 * Output on the shell that no run of this client owns: background jobs, other clients' runs, replay.
 *
 * @example
 * ```ts
 * const sh = await sb.shell({ onOutput: ({ stream, data }) => console.log(stream, new TextDecoder().decode(data)) })
 * ```
 */
export interface ShellOutput {
  /** The run it belongs to (another client's), or null for output between runs. */
  runId: string | null
  /** Which stream. */
  stream: 'stdout' | 'stderr'
  /** The raw bytes. */
  data: Uint8Array
  /** Log offset of the first byte. */
  offset: number
}

/** Run options with the encoding resolved; callbacks get the type the encoding implies. */
export interface StartOptions {
  timeoutMs?: number | undefined
  stdin?: string | Uint8Array | undefined
  stdinPipe?: boolean | undefined
  signal?: AbortSignal | undefined
  binary: boolean
  onStdout?: OutputCallback | undefined
  onStderr?: OutputCallback | undefined
}

/** A run's output callback with the encoding resolved. */
export type OutputCallback = (chunk: string | Uint8Array) => unknown

/** Resolves public run options; the callbacks receive bytes exactly when `binary` is set. */
export function toStartOptions(options: ShellRunOptions<'binary'> | ShellRunOptions<'utf8'>): StartOptions {
  return {
    timeoutMs: options.timeoutMs,
    stdin: options.stdin === 'pipe' ? undefined : options.stdin,
    stdinPipe: options.stdin === 'pipe',
    signal: options.signal,
    binary: options.encoding === 'binary',
    onStdout: options.onStdout as StartOptions['onStdout'],
    onStderr: options.onStderr as StartOptions['onStderr'],
  }
}
