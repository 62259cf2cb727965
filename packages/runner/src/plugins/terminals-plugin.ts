// Terminals over REST (open, list, get, close, resize, signal) and the terminal WebSocket,
// `/v1/sandboxes/:id/terminals/:terminalId/socket[?offset=n]` (terminal-socket.ts). A terminal
// lives in the sandbox's agent, so it outlives its sockets and a runner restart; the agent
// enforces the per-sandbox limit (TOO_MANY_TERMINALS).
import { TerminalParams, TerminalQuery } from '@conch/protocol'
import type { FastifyInstance } from 'fastify'
import { bindRoutes } from '../route-table.ts'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'
import { TerminalSocket } from '../terminal-socket.ts'

const OK = { ok: true as const }

/** Terminal REST routes. */
export async function terminalsPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  const link = (id: string) => ctx.manager.get(id).link()
  bindRoutes(app, {
    createTerminal: async ({ params, body }) => (await link(params.id)).call('terminal.open', body),
    listTerminals: async ({ params }) => (await link(params.id)).call('terminal.list', {}),
    getTerminal: async ({ params }) =>
      (await link(params.id)).call('terminal.get', { terminal: params.terminalId }),
    deleteTerminal: async ({ params }) => {
      await (await link(params.id)).call('terminal.close', { terminal: params.terminalId })
      return OK
    },
    resizeTerminal: async ({ params, body }) =>
      (await link(params.id)).call('terminal.resize', { terminal: params.terminalId, ...body }),
    signalTerminal: async ({ params, body }) => {
      await (await link(params.id)).call('terminal.signal', {
        terminal: params.terminalId,
        signal: body.signal,
      })
      return OK
    },
  })
}

/**
 * The terminal socket route; registered by the shell socket plugin, in the scope where the
 * WebSocket server lives.
 */
export function terminalSocketRoute(app: FastifyInstance, ctx: RunnerContext): void {
  app.get(
    '/v1/sandboxes/:id/terminals/:terminalId/socket',
    {
      websocket: true,
      config: { access: 'sandbox' },
      preValidation: async (request) => {
        const query = TerminalQuery.safeParse(request.query)
        const params = TerminalParams.safeParse(request.params)
        if (!query.success || !params.success) {
          const issues = [...(query.error?.issues ?? []), ...(params.error?.issues ?? [])]
          const fields = issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')
          throw new RunnerError('BAD_REQUEST', `invalid terminal socket request: ${fields}`)
        }
        const sandbox = ctx.manager.get(params.data.id)
        if (sandbox.record.status === 'dead') {
          throw new RunnerError(
            'SANDBOX_NOT_RUNNING',
            `sandbox ${params.data.id} is dead (${sandbox.record.deadReason}); create a new one`,
          )
        }
      },
    },
    (socket, request) => {
      const params = TerminalParams.parse(request.params)
      const principal = request.principal
      void new TerminalSocket({
        ws: socket,
        ctx,
        sandbox: ctx.manager.get(params.id),
        terminalId: params.terminalId,
        query: TerminalQuery.parse(request.query),
        log: request.log,
        tokenExpiresAt: principal?.kind === 'token' ? principal.expiresAt : null,
      }).start()
    },
  )
}
