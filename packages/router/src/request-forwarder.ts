// Forwarding one client request to the runner shard that owns it, and streaming the runner's
// answer back. A preview-host request goes to the path and Host its target names; a port
// relay's body streams through unread, any other body is the buffered one. A runner that
// cannot be reached is reported to the shard monitor.
import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { RouterError } from './router-error.ts'
import type { RouterMetrics } from './router-metrics.ts'
import type { SandboxTarget } from './sandbox-target.ts'
import type { Shard } from './shard-table.ts'
import { callUpstream, forwardableHeaders, returnableHeaders, type UpstreamPool } from './upstream-request.ts'

/** What forwarding needs from the router, made once per router. */
export interface RequestForwarderInit {
  /** Preview-host requests: their target, or why they are refused. */
  previews: WeakMap<IncomingMessage, SandboxTarget | RouterError>
  /** The router's metrics. */
  metrics: RouterMetrics
  /** Kept-alive connections to the runners. */
  pool: UpstreamPool
  /** Time to connect to a runner. */
  connectTimeoutMs: number
  /** Reports a runner that could not be reached. */
  onUnreachable: (shard: string, problem: string) => void
}

/**
 * Forwards the request to `shard` and streams the runner's answer back; the body is the
 * buffered one, or with `streamBody` the client's request stream itself.
 */
export type ForwardRequest = (
  shard: Shard,
  request: FastifyRequest,
  reply: FastifyReply,
  streamBody?: boolean,
) => Promise<FastifyReply>

/** Whether a request carries a body (a length above zero, or chunked). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

/** The router's forward function. */
export function requestForwarder(init: RequestForwarderInit): ForwardRequest {
  const { previews, metrics, pool, connectTimeoutMs, onUnreachable } = init
  return async (
    shard: Shard,
    request: FastifyRequest,
    reply: FastifyReply,
    streamBody = false,
  ): Promise<FastifyReply> => {
    const abort = new AbortController()
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) abort.abort()
    })
    const stream = streamBody && hasBody(request.raw)
    const body = stream ? request.raw : Buffer.isBuffer(request.body) ? request.body : undefined
    if (stream) metrics.streamedUploads.inc()
    const preview = previews.get(request.raw)
    const res = await callUpstream({
      shard,
      method: request.method,
      pathAndQuery:
        preview instanceof RouterError || !preview ? (request.raw.url ?? '/') : preview.pathAndQuery,
      headers: forwardableHeaders(request.headers),
      host: preview instanceof RouterError ? undefined : preview?.host,
      body,
      bodyLength: stream ? request.headers['content-length'] : undefined,
      onStreamClosed: () => metrics.streamedUploads.dec(),
      pool,
      connectTimeoutMs,
      signal: abort.signal,
    }).catch((error: unknown) => {
      if (error instanceof RouterError && error.code === 'RUNNER_UNAVAILABLE')
        onUnreachable(shard.name, error.message)
      throw error
    })
    metrics.forwarded.inc({ shard: shard.name, status: `${String(res.statusCode ?? 0).slice(0, 1)}xx` })
    return reply
      .code(res.statusCode ?? 502)
      .headers(returnableHeaders(res.headers))
      .send(res)
  }
}
