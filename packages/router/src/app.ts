// The router's HTTP + WebSocket server. It holds no state of its own and no secret: every
// sandbox request goes to the runner shard its id names, with the client's credentials, and the
// runner decides. New sandboxes go to the least-loaded ready runner; listings ask every runner.
// It never listens and never reads the environment: `main.ts` does both. Forwarding one
// request is request-forwarder.ts, answers to requests no route reaches are
// malformed-request.ts, and the log's redaction is log-redaction.ts.
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { PortSegment, PROTOCOL_VERSION } from '@conch/protocol'
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify'
import { capConnections } from './connection-cap.ts'
import { withRedactedUrls } from './log-redaction.ts'
import { answerMalformedRequest, answerUndecodableUrl } from './malformed-request.ts'
import { checkPreviewShards, previewTarget } from './preview-host.ts'
import { enforceRequestDeadlines } from './request-deadline.ts'
import { requestForwarder } from './request-forwarder.ts'
import { RouterError, toRouterError } from './router-error.ts'
import { RouterMetrics } from './router-metrics.ts'
import { listAcrossShards } from './sandbox-list.ts'
import { type SandboxTarget, sandboxTarget } from './sandbox-target.ts'
import { ShardMonitor } from './shard-monitor.ts'
import type { ShardTable } from './shard-table.ts'
import { refuseWithError, SocketRelay } from './socket-relay.ts'
import { forwardableHeaders, UpstreamPool } from './upstream-request.ts'

/** The router's version, reported by its health checks. */
export const ROUTER_VERSION = '0.1.0'

/** Everything `buildRouter` needs. */
export interface BuildRouterOptions {
  /** The runners, by shard name. */
  shards: ShardTable
  /** fastify logger options (pino); false for none. */
  logger?: FastifyServerOptions['logger']
  /** How often each runner's `/readyz` is read. */
  pollIntervalMs?: number
  /** Time to connect to a runner. */
  connectTimeoutMs?: number
  /** Largest API request body forwarded (port relay bodies stream, unlimited here). */
  maxBodyBytes?: number
  /** Largest request header block. */
  maxHeaderBytes?: number
  /** Largest WebSocket message relayed. */
  maxFrameBytes?: number
  /** Time a client has to send a request's headers. */
  headersTimeoutMs?: number
  /** Time a client has to send a whole request. */
  requestTimeoutMs?: number
  /** Time an idle keep-alive connection stays open. */
  keepAliveTimeoutMs?: number
  /** Open client connections at once. */
  maxConnections?: number
  /** The runners' wildcard preview domain (their `--preview-domain`); null for none. */
  previewDomain?: string | null
}

/** The router app, with its shard monitor for `main.ts` and tests. */
export type RouterApp = FastifyInstance & { shardMonitor: ShardMonitor }

/** Time a relayed socket has at shutdown to answer the router's close frame before it is cut. */
const SHUTDOWN_CLOSE_GRACE_MS = 2_000

/** The route every preview-host request is rewritten onto; its target is kept per request. */
const PREVIEW_ROUTE = '/.conch-preview'

/** Builds the router (plugins load on `ready()`/`listen`, which also polls every runner once). */
export function buildRouter(options: BuildRouterOptions): RouterApp {
  const headersTimeout = options.headersTimeoutMs ?? 10_000
  const requestTimeout = Math.max(options.requestTimeoutMs ?? 60_000, headersTimeout)
  const keepAliveTimeout = options.keepAliveTimeoutMs ?? 72_000
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000
  const previewDomain = options.previewDomain ?? null
  if (previewDomain) checkPreviewShards(options.shards)
  /** Preview-host requests: their target, or why they are refused. */
  const previews = new WeakMap<IncomingMessage, SandboxTarget | RouterError>()
  const app = Fastify({
    logger: withRedactedUrls(options.logger ?? false),
    requestIdHeader: 'x-request-id',
    bodyLimit: options.maxBodyBytes ?? 8 * 1024 * 1024,
    forceCloseConnections: true,
    // A forwarded buffered run may be silent for as long as its command runs; slow requests are
    // bounded by the header and request timeouts instead of an idle timeout.
    connectionTimeout: 0,
    requestTimeout,
    keepAliveTimeout,
    routerOptions: { maxParamLength: 200 },
    // Every path on a preview host is the sandbox app's, so the Host routes before the path does.
    rewriteUrl: (req) => {
      try {
        const target = previewTarget(req.headers.host, req.url ?? '/', previewDomain, options.shards)
        if (!target) return req.url ?? '/'
        previews.set(req, target)
      } catch (error) {
        previews.set(req, toRouterError(error))
      }
      return PREVIEW_ROUTE
    },
    // A URL fastify cannot decode gets the same typed answer as any other bad request.
    frameworkErrors: (_error, _request, reply) => answerUndecodableUrl(reply, metrics),
    http: {
      maxHeaderSize: options.maxHeaderBytes ?? 16 * 1024,
      headersTimeout,
      requestTimeout,
      keepAliveTimeout,
      connectionsCheckingInterval: Math.min(5_000, Math.max(25, Math.floor(headersTimeout / 4))),
    },
    clientErrorHandler: (error: NodeJS.ErrnoException, socket) =>
      answerMalformedRequest(error, socket, options.maxHeaderBytes ?? 16 * 1024),
  })
  capConnections(app.server, options.maxConnections ?? 4_096)
  enforceRequestDeadlines(app.server, {
    headersTimeoutMs: headersTimeout,
    requestTimeoutMs: requestTimeout,
    keepAliveTimeoutMs: keepAliveTimeout,
  })
  // Bodies are forwarded as bytes, whatever their type: the runner parses and validates them.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body))

  let monitor: ShardMonitor | null = null
  const metrics = new RouterMetrics(() => monitor!)
  monitor = new ShardMonitor({
    shards: options.shards,
    log: app.log,
    intervalMs: options.pollIntervalMs ?? 2_000,
    timeoutMs: connectTimeoutMs,
  })
  const shardMonitor = monitor
  const pool = new UpstreamPool()
  const onUnreachable = (shard: string, problem: string): void => shardMonitor.noteUnreachable(shard, problem)
  const relay = new SocketRelay({
    maxFrameBytes: options.maxFrameBytes ?? 16 * 1024 * 1024,
    connectTimeoutMs,
    log: app.log,
    metrics,
    onUnreachable,
  })

  app.setErrorHandler((error, request, reply) => {
    const e = toRouterError(error)
    if (e.code === 'INTERNAL') request.log.error({ err: error }, 'request failed')
    metrics.errors.inc({ code: e.code })
    reply.header('x-conch-protocol', String(PROTOCOL_VERSION))
    return reply.code(e.status).send(e.toBody())
  })
  app.setNotFoundHandler((request, reply) => {
    metrics.errors.inc({ code: 'NOT_FOUND' })
    const path = (request.raw.url ?? '').split('?')[0]!.slice(0, 200)
    return reply
      .code(404)
      .send(new RouterError('NOT_FOUND', `no route ${request.method} ${path}; see /v1/openapi.json`).toBody())
  })

  const forward = requestForwarder({ previews, metrics, pool, connectTimeoutMs, onUnreachable })

  app.get('/healthz', async () => ({ ok: true, version: ROUTER_VERSION }))
  app.get('/readyz', async (_request, reply) => {
    const checks = Object.fromEntries(shardMonitor.states().map((s) => [s.shard.name, s.ready]))
    const ok = Object.values(checks).some((ready) => ready)
    reply.code(ok ? 200 : 503)
    return { ok, version: ROUTER_VERSION, checks }
  })
  app.get('/metrics', async (_request, reply) => {
    reply.type(metrics.registry.contentType)
    return metrics.registry.metrics()
  })

  app.post('/v1/sandboxes', async (request, reply) => {
    const order = shardMonitor.placementOrder()
    if (order.length === 0) {
      const why = shardMonitor
        .states()
        .map((s) => `${s.shard.name}: ${s.problem ?? (s.sandboxes >= s.maxSandboxes ? 'full' : 'ready')}`)
      throw new RouterError(
        'RUNNER_UNAVAILABLE',
        `no runner is ready to take a new sandbox (${why.join('; ')})`,
        {
          details: { shards: shardMonitor.states().map((s) => s.shard.name) },
        },
      )
    }
    let last: RouterError | null = null
    for (const shard of order) {
      try {
        const sent = await forward(shard, request, reply)
        if (reply.statusCode < 300) {
          shardMonitor.notePlaced(shard.name)
          metrics.placed.inc({ shard: shard.name })
        }
        return sent
      } catch (error) {
        // Only a runner that could not be reached is skipped: the request never got to it.
        if (!(error instanceof RouterError && error.code === 'RUNNER_UNAVAILABLE')) throw error
        last = error
      }
    }
    throw last!
  })

  app.get('/v1/sandboxes', async (request, reply) => {
    const answer = await listAcrossShards({
      shards: [...options.shards.values()],
      pathAndQuery: request.raw.url ?? '/v1/sandboxes',
      headers: forwardableHeaders(request.headers),
      pool,
      connectTimeoutMs,
      onUnreachable,
    })
    return reply.code(answer.status).send(answer.body)
  })

  /** Requests that are the same on every runner go to a ready one (any, if none is ready). */
  const anyRunner = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const states = shardMonitor.states()
    const shard = (states.find((s) => s.ready) ?? states.find((s) => s.reachable) ?? states[0])!.shard
    return forward(shard, request, reply)
  }
  app.get('/v1/openapi.json', anyRunner)
  app.options('/v1/sandboxes', anyRunner)

  app.route({
    method: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH'],
    url: '/v1/sandboxes/*',
    handler: async (request, reply) => {
      const target = sandboxTarget(request.raw.url ?? '', options.shards)
      if (!target) throw new RouterError('NOT_FOUND', 'no such route; see /v1/openapi.json')
      return forward(target.shard, request, reply)
    },
  })

  // Sandbox port relays (path form and preview hosts) stream their bodies to the runner: no
  // parser reads them and the router's body limit does not apply (the runner's own limits and
  // bandwidth buckets do). Every other route above stays buffered and limited.
  app.register(async (relayScope) => {
    relayScope.removeAllContentTypeParsers()
    relayScope.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
    const methods = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH'] as const
    const portPath = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
      const { port } = request.params as { port: string }
      if (!PortSegment.safeParse(port).success)
        throw new RouterError(
          'BAD_REQUEST',
          `"${port.slice(0, 16)}" is not a port; use a number from 1 to 65535`,
        )
      const target = sandboxTarget(request.raw.url ?? '', options.shards)
      if (!target) throw new RouterError('NOT_FOUND', 'no such route; see /v1/openapi.json')
      return forward(target.shard, request, reply, true)
    }
    for (const url of ['/v1/sandboxes/:id/ports/:port', '/v1/sandboxes/:id/ports/:port/*'])
      relayScope.route({ method: [...methods], url, exposeHeadRoute: false, handler: portPath })
    relayScope.route({
      method: [...methods],
      url: PREVIEW_ROUTE,
      exposeHeadRoute: false,
      handler: async (request, reply) => {
        const target = previews.get(request.raw)
        if (target instanceof RouterError) throw target
        // Asked for by path, not by a preview Host.
        if (!target) throw new RouterError('NOT_FOUND', 'no such route; see /v1/openapi.json')
        return forward(target.shard, request, reply, true)
      },
    })
  })

  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy())
    const url = req.url ?? ''
    try {
      // Any socket under a sandbox's path (shell, terminal, a port) goes to its shard; the
      // runner answers for paths that have no socket.
      const target =
        previewTarget(req.headers.host, url, previewDomain, options.shards) ??
        sandboxTarget(url, options.shards)
      if (!target) {
        throw new RouterError(
          'NOT_FOUND',
          `no WebSocket at ${url.split('?')[0]!.slice(0, 200)}; sockets are under /v1/sandboxes/:id/`,
        )
      }
      relay.handle(req, socket, head, target)
    } catch (error) {
      const e = toRouterError(error)
      metrics.errors.inc({ code: e.code })
      refuseWithError(socket, e)
    }
  })

  app.addHook('onReady', async () => {
    await shardMonitor.start()
  })
  // Before the HTTP server's close, which waits for every relayed socket to end.
  app.addHook('preClose', async () => {
    await relay.close(SHUTDOWN_CLOSE_GRACE_MS)
  })
  app.addHook('onClose', async () => {
    shardMonitor.stop()
    pool.close()
  })
  return Object.assign(app, { shardMonitor })
}
