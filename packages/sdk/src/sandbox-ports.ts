import { ndjsonLines } from './ndjson-lines.ts'
import type { ExposedPort, ListeningPort, PortEvent } from './resource-info.ts'
import { exposedPort, okBody, portEvent, portList } from './rest-shapes.ts'
import type { SandboxContext } from './sandbox-context.ts'
import type { ExposePortOptions } from './sandbox-options.ts'

/** Exposes a sandbox port to browsers; `url` is the preview URL or the runner path, with its token. */
export async function exposePort(
  ctx: SandboxContext,
  port: number,
  options: ExposePortOptions,
): Promise<ExposedPort & { url: string }> {
  const exposed = await ctx.http.json('POST', `${ctx.path}/exposed-ports/${port}`, exposedPort, {
    json: options,
  })
  return { ...exposed, url: exposed.previewUrl ?? `${ctx.http.baseUrl}${exposed.path}` }
}

/** Ends a port's exposure and every token minted for it. */
export async function unexposePort(ctx: SandboxContext, port: number): Promise<void> {
  await ctx.http.json('DELETE', `${ctx.path}/exposed-ports/${port}`, okBody)
}

/** The runner URL of `path` on a sandbox port (the caller sends its credential). */
export function portUrl(ctx: SandboxContext, port: number, path: string): string {
  return `${ctx.http.baseUrl}${ctx.path}/ports/${port}${path.startsWith('/') ? path : `/${path}`}`
}

/** The TCP ports servers listen on inside the sandbox. */
export async function listPorts(ctx: SandboxContext): Promise<ListeningPort[]> {
  return (await ctx.http.json('GET', `${ctx.path}/ports`, portList)).ports
}

/** `port_opened` for every open port, then opened/closed events as servers start and stop. */
export async function* watchPorts(
  ctx: SandboxContext,
  options: { signal?: AbortSignal },
): AsyncGenerator<PortEvent> {
  const response = await ctx.http.open(
    'GET',
    `${ctx.path}/port-events`,
    { signal: options.signal },
    'application/x-ndjson',
  )
  if (!response.body) return
  for await (const line of ndjsonLines(response.body)) yield portEvent(line, 'port event')
}
