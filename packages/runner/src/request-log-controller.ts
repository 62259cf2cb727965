// How the runner logs HTTP requests: one line per request when its response is done, with the
// method, url, status and time (`GET /v1/sandboxes 200 2.1ms`), at info; health checks and
// metric scrapes, which arrive every few seconds, at debug. fastify's own two lines per request
// ("incoming request", "request completed") and its "Route ... not found" line are not written.
// A WebSocket upgrade that succeeds never completes as an HTTP response; its line (status 101,
// the time the socket was open) is written when the socket closes. Credentials in the URL (a
// port token in the query) are cut out first (protocol `url-redaction.ts`).

import { redactUrl } from '@conch/protocol'
import { type FastifyReply, type FastifyRequest, LogController } from 'fastify'

/** Paths that probes and scrapers poll; their requests are logged at debug. */
const QUIET_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics'])

/** fastify's log controller for the runner: one line per request. */
export class RequestLogController extends LogController {
  /** Writes nothing now: the request's line is written when it completes, or for an accepted WebSocket when it closes. */
  override incomingRequest(request: FastifyRequest, reply: FastifyReply): void {
    if (request.headers.upgrade?.toLowerCase() !== 'websocket') return
    // A refused upgrade is answered over HTTP and logged by requestCompleted; an accepted one
    // leaves its response unfinished.
    request.raw.socket.once('close', () => {
      if (!reply.raw.writableFinished) this.#write(null, request, reply, 101)
    })
  }

  /** Writes nothing: a 404 gets its line when it completes, like any other response. */
  override routeNotFound(): void {}

  /** The request's one line: `METHOD url status time`, with the error when the response failed. */
  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    this.#write(error, request, reply, reply.statusCode)
  }

  #write(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
    statusCode: number,
  ): void {
    const path = request.url.split('?')[0] ?? request.url
    // A port token (or a sandbox app's own secret) in the URL never reaches the log.
    const url = redactUrl(request.url)
    const responseTime = Math.round(reply.elapsedTime * 10) / 10
    const fields = { method: request.method, url, statusCode, responseTime }
    const line = `${request.method} ${url} ${statusCode} ${responseTime}ms`
    if (error) reply.log.error({ ...fields, err: error }, line)
    else if (QUIET_PATHS.has(path)) reply.log.debug(fields, line)
    else reply.log.info(fields, line)
  }
}
