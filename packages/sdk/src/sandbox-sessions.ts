import { LIMITS } from '@conch/protocol'
import type { SessionInfo } from './resource-info.ts'
import { okBody, sessionInfo, sessionList } from './rest-shapes.ts'
import type { SandboxContext } from './sandbox-context.ts'
import type { ReattachOptions, SessionOptions, ShellOptions } from './sandbox-options.ts'
import { Session } from './session.ts'
import { Shell } from './shell.ts'
import { DEFAULT_CONNECTION_POLICY } from './shell-connection.ts'
import type { ShellOutput } from './shell-run-options.ts'

/** Creates a session (a new long-lived bash) in the sandbox. */
export async function createSession(ctx: SandboxContext, options: SessionOptions): Promise<Session> {
  const info = await ctx.http.json('POST', `${ctx.path}/sessions`, sessionInfo, { json: options })
  return new Session(ctx.http, ctx.path, info)
}

/** A handle on an existing session. */
export async function getSession(ctx: SandboxContext, sessionId: string): Promise<Session> {
  const info = await ctx.http.json(
    'GET',
    `${ctx.path}/sessions/${encodeURIComponent(sessionId)}`,
    sessionInfo,
  )
  return new Session(ctx.http, ctx.path, info)
}

/** The sandbox's sessions. */
export async function listSessions(ctx: SandboxContext): Promise<SessionInfo[]> {
  return (await ctx.http.json('GET', `${ctx.path}/sessions`, sessionList)).sessions
}

/** Deletes a session and kills its bash. */
export async function deleteSession(ctx: SandboxContext, sessionId: string): Promise<void> {
  await ctx.http.json('DELETE', `${ctx.path}/sessions/${encodeURIComponent(sessionId)}`, okBody)
}

/** Creates a session and opens a shell that owns it; the session is deleted if the shell cannot open. */
export async function openShell(ctx: SandboxContext, options: ShellOptions): Promise<Shell> {
  const { onOutput, ...sessionOptions } = options
  const session = await createSession(ctx, sessionOptions)
  try {
    return await attachShell(ctx, session, true, undefined, onOutput)
  } catch (err) {
    await session.delete().catch(() => {})
    throw err
  }
}

/** Opens a shell on an existing session, replaying its output from `options.offset`. */
export async function reattachShell(
  ctx: SandboxContext,
  sessionId: string,
  options: ReattachOptions,
): Promise<Shell> {
  const session = await getSession(ctx, sessionId)
  return attachShell(ctx, session, false, options.offset, options.onOutput)
}

/** Closes every shell the handle has open. */
export function closeShells(ctx: SandboxContext): void {
  for (const sh of ctx.shells) sh.close()
  ctx.shells.clear()
}

/** Opens a shell on `session` over a WebSocket, tracked in `ctx.shells` until it closes. */
async function attachShell(
  ctx: SandboxContext,
  session: Session,
  owned: boolean,
  offset: number | undefined,
  onOutput: ((output: ShellOutput) => void) | undefined,
): Promise<Shell> {
  const shell: Shell = new Shell({
    session,
    sandboxId: ctx.id,
    baseUrl: ctx.http.baseUrl,
    secret: ctx.secret,
    WebSocket: await ctx.webSocket(),
    policy: { ...DEFAULT_CONNECTION_POLICY, ...ctx.options.connection },
    maxOutputBytes: ctx.options.maxOutputBytes ?? LIMITS.outputCapBytes,
    owned,
    offset,
    onOutput,
    onClose: () => ctx.shells.delete(shell),
  })
  ctx.shells.add(shell)
  await shell.open()
  return shell
}
