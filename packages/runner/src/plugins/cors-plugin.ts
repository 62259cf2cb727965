// Cross-origin access for browser apps. A page served from another origin calls the REST API
// with a sandbox-scoped token in `Authorization`, which makes the browser send a preflight
// first. Origins are allowed only when the operator lists them (`--cors-origins`); with no
// list, no CORS header is ever sent and browsers keep other origins out. The preflight is
// answered before authentication, since browsers send it without credentials. WebSockets
// are not subject to CORS; the shell socket authenticates by subprotocol.
import type { FastifyInstance } from 'fastify'

/** Options of the CORS plugin. */
export interface CorsOptions {
  /** Allowed origins (`https://app.example.com`), or `*` for any. Empty: CORS is off. */
  origins: readonly string[]
}

const ALLOWED_METHODS = 'GET, POST, PUT, DELETE'
const ALLOWED_HEADERS = 'authorization, content-type'
const PREFLIGHT_MAX_AGE_S = '600'

/** Adds CORS headers for allowed origins and answers their preflight requests. */
export async function corsPlugin(app: FastifyInstance, options: CorsOptions): Promise<void> {
  if (options.origins.length === 0) return
  const any = options.origins.includes('*')
  const allowed = new Set(options.origins)
  app.addHook('onRequest', async (request, reply) => {
    const origin = request.headers.origin
    if (typeof origin !== 'string' || !(any || allowed.has(origin))) return
    reply.header('access-control-allow-origin', any ? '*' : origin)
    if (!any) reply.header('vary', 'Origin')
    if (request.method === 'OPTIONS' && request.headers['access-control-request-method']) {
      reply.header('access-control-allow-methods', ALLOWED_METHODS)
      reply.header('access-control-allow-headers', ALLOWED_HEADERS)
      reply.header('access-control-max-age', PREFLIGHT_MAX_AGE_S)
      return reply.code(204).send()
    }
  })
}

// Share the hook with sibling plugins instead of encapsulating it (what fastify-plugin does).
Object.assign(corsPlugin, { [Symbol.for('skip-override')]: true })
