import { SHELL_SUBPROTOCOL, ShellQuery, TERMINAL_SUBPROTOCOL } from '@conch/protocol'
import websocket, { type WebsocketPluginOptions } from '@fastify/websocket'
import type { FastifyInstance } from 'fastify'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'
import { ShellConnection } from '../shell-connection.ts'
import { ShellWebSocket } from '../shell-web-socket.ts'
import { terminalSocketRoute } from './terminals-plugin.ts'

/** The WebSocket class ws's server options take. */
type WebSocketClass = NonNullable<NonNullable<WebsocketPluginOptions['options']>['WebSocket']>

/** Bytes above the frame limit that still arrive as a frame (and get FRAME_TOO_LARGE); larger ones close the socket. */
const FRAME_SLACK_BYTES = 1_048_576

/**
 * Time a shell or terminal socket has at shutdown to answer the runner's close frame before its
 * TCP connection is cut. ws would wait 30 s for the answer, so a client that stops reading held
 * the runner's shutdown open that long.
 */
const SHUTDOWN_CLOSE_GRACE_MS = 2_000

/** The shell WebSocket `/v1/sandboxes/:id/shell[?sessionId=&offset=&encoding=]`. */
export async function shellSocketPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  const sessions = ctx.manager.shellSessions
  await app.register(websocket, {
    options: {
      maxPayload: ctx.limits.maxClientFrameBytes + FRAME_SLACK_BYTES,
      handleProtocols: (protocols: Set<string>) =>
        protocols.has(SHELL_SUBPROTOCOL)
          ? SHELL_SUBPROTOCOL
          : protocols.has(TERMINAL_SUBPROTOCOL)
            ? TERMINAL_SUBPROTOCOL
            : false,
      // The connection checks UTF-8 itself and answers a bad frame with an error frame; ws
      // would close the socket.
      skipUTF8Validation: true,
      // ws's typings want the module's namespace statics on the class; ws only calls `new`.
      WebSocket: ShellWebSocket as unknown as WebSocketClass,
    },
    // A frame ws refuses has already been answered with an error frame and a typed close (see
    // ShellWebSocket); it is worth one warning line, not a stack trace. A client that vanishes
    // mid-frame is routine.
    errorHandler: (error, socket, request) => {
      const code = (error as { code?: unknown }).code
      if (typeof code === 'string' && code.startsWith('WS_ERR_')) {
        request.log.warn({ code, url: request.url.split('?')[0] }, `shell socket closed: ${error.message}`)
        return
      }
      request.log.debug({ code }, `shell socket error: ${error.message}`)
      socket.terminate()
    },
  })
  // @fastify/websocket's own preClose (before this one) sends every socket a close frame; what
  // has not closed within the grace is cut, so the server's close does not wait on it.
  app.addHook('preClose', async () => {
    const open = [...app.websocketServer.clients]
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      Promise.all(
        open.map((ws) =>
          ws.readyState === ws.CLOSED ? null : new Promise((resolve) => ws.once('close', resolve)),
        ),
      ),
      new Promise((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_CLOSE_GRACE_MS)
      }),
    ])
    clearTimeout(timer)
    for (const ws of open) ws.terminate()
  })
  // A refused upgrade gets its HTTP error answer, then its socket is closed: nothing else can
  // happen on it, and an open upgrade socket would hold the server open at shutdown.
  app.addHook('onResponse', async (request, reply) => {
    if (request.raw.headers.upgrade && reply.statusCode >= 400) request.raw.socket?.destroy()
  })
  app.get(
    '/v1/sandboxes/:id/shell',
    {
      websocket: true,
      config: { access: 'sandbox' },
      preValidation: async (request) => {
        const parsed = ShellQuery.safeParse(request.query)
        if (!parsed.success) {
          const fields = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')
          throw new RunnerError('BAD_REQUEST', `invalid shell query: ${fields}`)
        }
        const { id } = request.params as { id: string }
        const sandbox = ctx.manager.get(id)
        if (sandbox.record.status === 'dead') {
          throw new RunnerError('SANDBOX_NOT_RUNNING', `sandbox ${id} is dead (${sandbox.record.deadReason})`)
        }
        // Refused before the upgrade when the session is already full; the connection counts
        // the socket for real once it attaches.
        const { sessionId } = parsed.data
        const max = ctx.limits.maxSocketsPerSession
        if (sessionId !== undefined && sessions.sockets(id, sessionId) >= max) {
          throw new RunnerError(
            'RATE_LIMITED',
            `session ${sessionId} of sandbox ${id} already has ${max} shell sockets open (the limit)`,
            { details: { limit: max, value: sessions.sockets(id, sessionId) } },
          )
        }
      },
    },
    (socket, request) => {
      const query = ShellQuery.parse(request.query)
      const sandbox = ctx.manager.get((request.params as { id: string }).id)
      const principal = request.principal
      const connection = new ShellConnection({
        ws: socket,
        ctx,
        sandbox,
        query,
        log: request.log,
        socket: request.raw.socket,
        sessions,
        tokenExpiresAt: principal?.kind === 'token' ? principal.expiresAt : null,
      })
      void connection.start()
    },
  )
  terminalSocketRoute(app, ctx)
}
