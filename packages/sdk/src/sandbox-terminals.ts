import { terminalInfo, terminalList } from './rest-shapes.ts'
import type { SandboxContext } from './sandbox-context.ts'
import { Terminal, type TerminalInfo, type TerminalOptions } from './terminal.ts'

/** Starts a terminal in the sandbox and attaches to it from its first byte. */
export async function openTerminal(ctx: SandboxContext, options: TerminalOptions): Promise<Terminal> {
  const info = await ctx.http.json('POST', `${ctx.path}/terminals`, terminalInfo, { json: options })
  return attachTerminal(ctx, info.id, { offset: info.startOffset })
}

/** Attaches to terminal `id` over a WebSocket, replaying from `options.offset` (default: its scrollback's start). */
export async function attachTerminal(
  ctx: SandboxContext,
  id: string,
  options: { offset?: number },
): Promise<Terminal> {
  const info = await ctx.http.json('GET', `${ctx.path}/terminals/${encodeURIComponent(id)}`, terminalInfo)
  const term = new Terminal(
    {
      http: ctx.http,
      path: ctx.path,
      baseUrl: ctx.http.baseUrl,
      secret: ctx.secret,
      WebSocket: await ctx.webSocket(),
    },
    info,
    options.offset ?? info.startOffset,
  )
  await term.connect()
  return term
}

/** The sandbox's terminals, running and ended (until closed). */
export async function listTerminals(ctx: SandboxContext): Promise<TerminalInfo[]> {
  return (await ctx.http.json('GET', `${ctx.path}/terminals`, terminalList)).terminals
}
