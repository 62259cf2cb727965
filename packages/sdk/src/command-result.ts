import type { RunResult } from '@conch/protocol'
import { decodeBase64 } from './base64.ts'

/**
 * How output is returned: `utf8` text (the default) or `binary` bytes, lossless.
 *
 * @example
 * ```ts
 * const bytes = await sh.run('cat image.png', { encoding: 'binary' satisfies OutputEncoding })
 * ```
 */
export type OutputEncoding = 'utf8' | 'binary'

/**
 * The output type for an encoding: `string` for `utf8`, `Uint8Array` for `binary`.
 *
 * @example
 * ```ts
 * const data: OutputOf<'binary'> = (await sh.run('head -c 4 /dev/urandom', { encoding: 'binary' })).stdout
 * ```
 */
export type OutputOf<E extends OutputEncoding> = E extends 'binary' ? Uint8Array : string

/**
 * The result of one command: `sh.run`, `session.exec` or `sb.exec`. It resolves for every exit
 * code; a timeout resolves too, with `timedOut: true` and the output written until then.
 *
 * @example
 * ```ts
 * const { stdout, exitCode, timedOut } = await sh.run('npm test', { timeoutMs: 60_000 })
 * if (timedOut) console.log('tests hung')
 * else if (exitCode !== 0) console.log(stdout)
 * ```
 */
export interface CommandResult<T extends string | Uint8Array = string> {
  /** Everything the command wrote to stdout, up to the output cap. */
  stdout: T
  /** Everything the command wrote to stderr, up to the output cap. */
  stderr: T
  /** `$?` of the command: 0-255, 128+n for signal n. */
  exitCode: number
  /** True when the timeout stopped the command. */
  timedOut: boolean
  /** True when the sandbox's memory limit killed the command (`exitCode` 137); raise `limits.memoryBytes` or use less memory. */
  oomKilled: boolean
  /** True when a stream exceeded the output cap and was cut (on a character boundary for text). */
  truncated: boolean
  /** Wall time of the command, as the sandbox measured it. */
  durationMs: number
  /** Total bytes written to stdout, including any cut part. */
  stdoutBytes: number
  /** Total bytes written to stderr, including any cut part. */
  stderrBytes: number
}

/** Converts a REST `RunResult` to a `CommandResult` in the encoding the caller asked for. */
export function fromRunResult(result: RunResult, binary: boolean): CommandResult<string | Uint8Array> {
  const out = (data: string): string | Uint8Array => {
    if (result.encoding === 'utf8') return binary ? new TextEncoder().encode(data) : data
    const bytes = decodeBase64(data)
    return binary ? bytes : new TextDecoder().decode(bytes)
  }
  return {
    stdout: out(result.stdout),
    stderr: out(result.stderr),
    exitCode: result.exitCode,
    timedOut: result.timedOut,
    oomKilled: result.oomKilled === true,
    truncated: result.truncated,
    durationMs: result.durationMs,
    stdoutBytes: result.stdoutBytes,
    stderrBytes: result.stderrBytes,
  }
}
