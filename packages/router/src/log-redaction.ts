// Keeping credentials out of the router's log: the header paths pino redacts, and a request
// serializer that writes the URL with its credentials cut out (a browser's first visit to an
// exposed port carries its port token in the query).
import { redactUrl } from '@conch/protocol'
import type { FastifyServerOptions } from 'fastify'

/** Log options that keep secrets out of the log. */
export const REDACTED_PATHS = ['req.headers.authorization', 'req.headers["sec-websocket-protocol"]']

/**
 * `logger` with fastify's request serializer changed to write the URL with its credentials cut
 * out: a browser's first visit to an exposed port carries its port token in the query.
 */
export function withRedactedUrls(logger: FastifyServerOptions['logger']): FastifyServerOptions['logger'] {
  if (!logger || typeof logger !== 'object') return logger
  return {
    ...logger,
    serializers: {
      ...logger.serializers,
      req: (req: { method?: string; url?: string; host?: string; ip?: string }) => ({
        method: req.method,
        url: redactUrl(req.url ?? ''),
        host: req.host,
        remoteAddress: req.ip,
      }),
    },
  }
}
