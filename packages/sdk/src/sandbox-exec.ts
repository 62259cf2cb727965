import { encodeBase64 } from './base64.ts'
import { type CommandResult, fromRunResult, type OutputEncoding, type OutputOf } from './command-result.ts'
import { runResult } from './rest-shapes.ts'
import { commandDeadlineMs, stdinFields } from './run-budget.ts'
import type { SandboxContext } from './sandbox-context.ts'
import type { SandboxExecOptions } from './sandbox-options.ts'

/** Runs one command in a fresh `bash -c` (or in a session's shell) and waits for its result. */
export async function execInSandbox<E extends OutputEncoding = 'utf8'>(
  ctx: SandboxContext,
  command: string,
  options: SandboxExecOptions<E>,
): Promise<CommandResult<OutputOf<E>>> {
  const binary = options.encoding === 'binary'
  const result = await ctx.http.json('POST', `${ctx.path}/exec`, runResult, {
    json: {
      command,
      cwd: options.cwd,
      env: options.env,
      ...stdinFields(options.stdin, encodeBase64),
      timeoutMs: options.timeoutMs,
      encoding: binary ? 'base64' : 'utf8',
      sessionId: options.sessionId,
    },
    timeoutMs: commandDeadlineMs(options.timeoutMs, undefined),
    signal: options.signal,
  })
  return fromRunResult(result, binary) as CommandResult<OutputOf<E>>
}
