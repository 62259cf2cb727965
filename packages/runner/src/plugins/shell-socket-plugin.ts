import { SHELL_SUBPROTOCOL, ShellQuery } from '@conch/protocol'
import websocket from '@fastify/websocket'
import type { FastifyInstance } from 'fastify'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'
import { ShellConnection } from '../shell-connection.ts'

/** Bytes above the frame limit that still arrive as a frame (and get FRAME_TOO_LARGE); larger ones close the socket. */
const FRAME_SLACK_BYTES = 1_048_576

/** The shell WebSocket `/v1/sandboxes/:id/shell[?sessionId=&offset=&encoding=]`. */
export async function shellSocketPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  await app.register(websocket, {
    options: {
      maxPayload: ctx.limits.maxClientFrameBytes + FRAME_SLACK_BYTES,
      handleProtocols: (protocols: Set<string>) =>
        protocols.has(SHELL_SUBPROTOCOL) ? SHELL_SUBPROTOCOL : false,
    },
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
          throw new RunnerError(
            'SANDBOX_NOT_RUNNING',
            `sandbox ${id} is dead (${sandbox.record.deadReason}); create a new one`,
          )
        }
      },
    },
    (socket, request) => {
      const query = ShellQuery.parse(request.query)
      const sandbox = ctx.manager.get((request.params as { id: string }).id)
      const connection = new ShellConnection(socket, ctx, sandbox, query, request.log, request.raw.socket)
      void connection.start()
    },
  )
}
