// Binds handlers to the protocol's route table by operationId. Each route's params, query and
// JSON body are parsed with the route's zod schemas before the handler runs; bad input is a
// BAD_REQUEST ErrorBody naming the fields. The route's access level (public, admin-only or
// sandbox-scoped) is put in its fastify config for the auth hook.
import { API_ROUTES, type ApiRoute, type OperationId } from '@conch/protocol'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { z } from 'zod'
import type { Principal } from './plugins/auth-plugin.ts'
import { RunnerError } from './runner-error.ts'

/** Who may call a route: anyone, the API key only, or the key or a token of the route's sandbox. */
export type Access = 'public' | 'admin' | 'sandbox' | 'any'

type RouteOf<Op extends OperationId> = Extract<(typeof API_ROUTES)[number], { operationId: Op }>
type Part<R, K extends string> = R extends { [P in K]: infer S extends z.ZodType } ? z.infer<S> : undefined

/** What a handler receives: parsed input plus the raw request and reply. */
export interface RouteInput<Op extends OperationId> {
  /** Parsed path parameters. */
  params: Part<RouteOf<Op>, 'params'>
  /** Parsed query. */
  query: Part<RouteOf<Op>, 'query'>
  /** Parsed JSON body. */
  body: Part<RouteOf<Op>, 'body'>
  /** The request (raw body streams, headers). */
  request: FastifyRequest
  /** The reply (streams, content types). */
  reply: FastifyReply
  /** Who is calling. */
  principal: Principal | null
}

/** Handlers by operationId; a handler returns the JSON answer, or the reply after sending a stream. */
export type RouteHandlers = { [Op in OperationId]?: (input: RouteInput<Op>) => Promise<unknown> }

const ADMIN_ONLY: ReadonlySet<string> = new Set([
  'createSandbox',
  'listSandboxes',
  'createToken',
  'listSnapshots',
  'getSnapshot',
  'deleteSnapshot',
])

/** The access level of a route. */
export function accessOf(route: ApiRoute): Access {
  if (route.public) return 'public'
  if (ADMIN_ONLY.has(route.operationId)) return 'admin'
  return route.path.includes(':id') ? 'sandbox' : 'any'
}

function parsePart(schema: z.ZodType | undefined, value: unknown, where: string): unknown {
  if (!schema) return undefined
  const parsed = schema.safeParse(value ?? (where === 'body' ? {} : value))
  if (parsed.success) return parsed.data
  const fields = parsed.error.issues
    .slice(0, 5)
    .map((i) => `${i.path.join('.') || where}: ${i.message}`)
    .join('; ')
  throw new RunnerError('BAD_REQUEST', `invalid ${where}: ${fields}`, {
    details: {
      issues: parsed.error.issues.slice(0, 5).map((i) => ({ path: i.path.map(String), message: i.message })),
    },
  })
}

/** Registers every route in `API_ROUTES` that has a handler in `handlers`. */
export function bindRoutes(app: FastifyInstance, handlers: RouteHandlers): void {
  for (const route of API_ROUTES as readonly ApiRoute[]) {
    const handler = (
      handlers as Record<string, ((input: RouteInput<OperationId>) => Promise<unknown>) | undefined>
    )[route.operationId]
    if (!handler) continue
    app.route({
      method: route.method,
      url: route.path,
      config: { access: accessOf(route), operationId: route.operationId },
      handler: async (request, reply) => {
        const input = {
          params: parsePart(route.params, request.params, 'path parameters'),
          query: parsePart(route.query, request.query, 'query'),
          body: route.body ? parsePart(route.body, request.body, 'body') : undefined,
          request,
          reply,
          principal: request.principal,
        } as RouteInput<OperationId>
        const result = await handler(input)
        if (result === reply) return reply
        return result
      },
    })
  }
}
