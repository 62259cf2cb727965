import { clampTimeout, type Encoding, isBase64, LIMITS, type RunResult } from '@conch/protocol'
import { RunnerError } from './runner-error.ts'
import type { RunnerLimits } from './runner-limits.ts'

/** COMMAND_TOO_LARGE when a command's UTF-8 length exceeds the limit. */
export function checkCommand(command: string, limits: RunnerLimits): void {
  // UTF-8 is at most 3 bytes per UTF-16 unit: skip the exact count for short commands.
  if (command.length * 3 <= limits.maxCommandBytes) return
  const bytes = Buffer.byteLength(command, 'utf8')
  if (bytes > limits.maxCommandBytes) {
    throw new RunnerError(
      'COMMAND_TOO_LARGE',
      `the command is ${bytes} bytes, over the limit of ${limits.maxCommandBytes} bytes`,
      { details: { limit: limits.maxCommandBytes, value: bytes } },
    )
  }
}

/** Clamps a per-call timeout between 1 s and the runner's maximum; undefined keeps the session default. */
export function clampCallTimeout(timeoutMs: number | undefined, limits: RunnerLimits): number | undefined {
  return timeoutMs === undefined ? undefined : clampTimeout(timeoutMs, timeoutMs, limits.maxCommandTimeoutMs)
}

/** stdin as base64 for the agent, after checking that base64 input is base64 and its size. */
export function stdinToBase64(stdin: string | undefined, encoding: Encoding | undefined): string | undefined {
  if (stdin === undefined) return undefined
  // Buffer.from skips characters that are not base64, so bad input would reach bash changed.
  if (encoding === 'base64' && !isBase64(stdin)) {
    throw new RunnerError(
      'BAD_REQUEST',
      'stdin is not valid base64 (stdinEncoding is base64: use A-Z a-z 0-9 + / with optional = padding)',
    )
  }
  const bytes = encoding === 'base64' ? Buffer.from(stdin, 'base64') : Buffer.from(stdin, 'utf8')
  if (bytes.byteLength > LIMITS.maxStdinBytes) {
    throw new RunnerError(
      'BAD_REQUEST',
      `stdin is ${bytes.byteLength} bytes; the limit is ${LIMITS.maxStdinBytes}. Upload large input as a file`,
    )
  }
  return bytes.toString('base64')
}

/** Re-encodes a result's output (the agent answers in base64) into the encoding the caller asked for. */
export function encodeRunResult(result: RunResult, encoding: Encoding | undefined): RunResult {
  const want = encoding ?? 'utf8'
  if (result.encoding === want) return result
  const from = result.encoding
  return {
    ...result,
    encoding: want,
    stdout: Buffer.from(result.stdout, from).toString(want),
    stderr: Buffer.from(result.stderr, from).toString(want),
  }
}

/** Whether an agent's run answer is a buffered result (and not the `{}` of a streamed run). */
export function isRunResult(result: RunResult | Record<string, never>): result is RunResult {
  return 'exitCode' in result
}

/** The buffered result of a run the runner asked to buffer; INTERNAL if the agent answered `{}`. */
export function bufferedResult(result: RunResult | Record<string, never>): RunResult {
  if (!isRunResult(result))
    throw new RunnerError('INTERNAL', 'the agent answered a buffered run without a result')
  return result
}
