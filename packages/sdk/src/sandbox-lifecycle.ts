import type { SandboxInfo } from './resource-info.ts'
import { okBody, sandboxInfo, sandboxList } from './rest-shapes.ts'
import type { RunnerConnection } from './runner-connection.ts'
import type { SandboxContext } from './sandbox-context.ts'
import type { CreateSandboxOptions } from './sandbox-options.ts'
import { closeShells } from './sandbox-sessions.ts'

/** Creates a sandbox on the runner and returns what the runner reports about it. */
export function createSandbox(runner: RunnerConnection, options: CreateSandboxOptions): Promise<SandboxInfo> {
  return runner.http.json('POST', '/v1/sandboxes', sandboxInfo, {
    json: {
      driver: options.driver,
      host: options.host,
      env: options.env,
      limits: options.limits,
      idleTimeoutMs: options.idleTimeoutMs,
      hibernateAfterMs: options.hibernateAfterMs,
      sessionIdleTimeoutMs: options.sessionIdleTimeoutMs,
      metadata: options.metadata,
      fromSnapshot: options.fromSnapshot,
      restartProcesses: options.restartProcesses,
      network: options.network,
    },
    timeoutMs: Math.max(runner.http.requestTimeoutMs, 60_000),
  })
}

/** What the runner reports about sandbox `id` now. */
export function fetchSandbox(runner: Pick<RunnerConnection, 'http'>, id: string): Promise<SandboxInfo> {
  return runner.http.json('GET', `/v1/sandboxes/${encodeURIComponent(id)}`, sandboxInfo)
}

/** The runner's sandboxes. */
export async function listSandboxes(runner: RunnerConnection): Promise<SandboxInfo[]> {
  return (await runner.http.json('GET', '/v1/sandboxes', sandboxList)).sandboxes
}

/** Closes the handle's shells, then destroys the sandbox. */
export async function destroySandbox(ctx: SandboxContext): Promise<void> {
  closeShells(ctx)
  await ctx.http.json('DELETE', ctx.path, okBody, {
    timeoutMs: Math.max(ctx.http.requestTimeoutMs, 60_000),
  })
}
