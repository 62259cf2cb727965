import { BackgroundProcess } from './background-process.ts'
import type { ProcessInfo } from './resource-info.ts'
import { processInfo, processList } from './rest-shapes.ts'
import type { SandboxContext } from './sandbox-context.ts'
import type { StartProcessOptions } from './sandbox-options.ts'

/** Starts a background process in the sandbox. */
export async function startProcess(
  ctx: SandboxContext,
  command: string,
  options: StartProcessOptions,
): Promise<BackgroundProcess> {
  const info = await ctx.http.json('POST', `${ctx.path}/processes`, processInfo, {
    json: { command, ...options },
  })
  return new BackgroundProcess(ctx.http, ctx.path, info)
}

/** Handles on the sandbox's background processes. */
export async function listProcesses(ctx: SandboxContext): Promise<BackgroundProcess[]> {
  const { processes } = await ctx.http.json('GET', `${ctx.path}/processes`, processList)
  return processes.map((info: ProcessInfo) => new BackgroundProcess(ctx.http, ctx.path, info))
}

/** A handle on an existing background process. */
export async function getProcess(ctx: SandboxContext, processId: string): Promise<BackgroundProcess> {
  const info = await ctx.http.json(
    'GET',
    `${ctx.path}/processes/${encodeURIComponent(processId)}`,
    processInfo,
  )
  return new BackgroundProcess(ctx.http, ctx.path, info)
}
