// The runner's HTTP + WebSocket server, assembled from one fastify plugin per concern. It never
// listens and never reads the environment: `main.ts` does both and hands everything in here.
import { PROTOCOL_VERSION } from '@conch/protocol'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { ConnectionGuard } from './connection-guard.ts'
import type { SandboxDriver } from './drivers/sandbox-driver.ts'
import { EgressGateway } from './egress-gateway.ts'
import { EgressProxy } from './egress-proxy.ts'
import { AddressScreen, systemResolver } from './egress-resolver.ts'
import type { NetworkOptions } from './network-options.ts'
import { connectionCap, readOpenFileLimit } from './open-file-limit.ts'
import { authPlugin } from './plugins/auth-plugin.ts'
import { consolePlugin } from './plugins/console-plugin.ts'
import { corsPlugin } from './plugins/cors-plugin.ts'
import { execPlugin } from './plugins/exec-plugin.ts'
import { filesPlugin } from './plugins/files-plugin.ts'
import { healthPlugin } from './plugins/health-plugin.ts'
import { metricsPlugin } from './plugins/metrics-plugin.ts'
import { openapiPlugin } from './plugins/openapi-plugin.ts'
import { portsPlugin } from './plugins/ports-plugin.ts'
import { processesPlugin } from './plugins/processes-plugin.ts'
import { sandboxesPlugin } from './plugins/sandboxes-plugin.ts'
import { sessionsPlugin } from './plugins/sessions-plugin.ts'
import { shellSocketPlugin } from './plugins/shell-socket-plugin.ts'
import { snapshotsPlugin } from './plugins/snapshots-plugin.ts'
import { terminalsPlugin } from './plugins/terminals-plugin.ts'
import { PortExposures } from './port-exposures.ts'
import { previewRewrite } from './preview-host.ts'
import { RequestLogController } from './request-log-controller.ts'
import { listeningAddresses } from './runner-addresses.ts'
import type { RunnerContext } from './runner-context.ts'
import { RunnerError } from './runner-error.ts'
import { defaultLimits, type RunnerLimitsInput } from './runner-limits.ts'
import { RunnerMetrics } from './runner-metrics.ts'
import { RUNNER_VERSION } from './runner-version.ts'
import { SandboxManager } from './sandbox-manager.ts'
import { SandboxNetworkLimits } from './sandbox-network-limits.ts'
import { SandboxSnapshots } from './sandbox-snapshots.ts'
import type { SnapshotBackend } from './snapshots/snapshot-store.ts'
import type { StateStore } from './state-store.ts'

/** Everything `buildApp` needs; side effects (state, drivers, logger, clock) are injected. */
export interface BuildAppOptions {
  /** Durable state. */
  store: StateStore
  /** Hashes of the accepted API keys. */
  apiKeyHashes: readonly string[]
  /** Sandbox drivers; the first is the default unless `defaultDriver` names another. */
  drivers: readonly SandboxDriver[]
  /** Driver used when a request names none. */
  defaultDriver?: string
  /** Limits (defaults from the protocol). */
  limits?: RunnerLimitsInput
  /** fastify logger options (pino); false for none. */
  logger?: FastifyServerOptions['logger']
  /** Clock. */
  now?: () => number
  /** Origins whose browser pages may call the REST API (`*` for any); none by default. */
  corsOrigins?: readonly string[]
  /** Shard name written into every new sandbox id, for a router in front of several runners. */
  shard?: string | null
  /** Ports and egress: public ports, the preview domain, egress permits; none by default. */
  network?: NetworkOptions
  /** The process's soft open-file limit (null: unknown); read from /proc/self/limits when absent. */
  openFileLimit?: number | null
  /** Where snapshots are kept; without one the runner refuses snapshot requests. */
  snapshotStore?: SnapshotBackend
  /** Whether forks mount their workspace as an overlay where they can (`auto`, the default) or always copy it (`off`). */
  snapshotOverlay?: 'auto' | 'off'
  /** Sandboxes kept started ahead of demand per driver (warm-pool.ts); 0 (the default here) disables the pool. */
  warmPool?: number
  /** Memory the host has available now (the warm pool's check); `os.freemem` when absent. */
  availableMemoryBytes?: () => number
}

/** Log options that keep secrets out of the log. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["sec-websocket-protocol"]',
  'headers.authorization',
  'apiKey',
  'token',
]

/** The runner app with its context, for tests and `main.ts`. */
export type RunnerApp = FastifyInstance & { conch: RunnerContext }

function errorCodeOf(error: { code?: unknown; statusCode?: unknown; validation?: unknown }): RunnerError {
  const code = typeof error.code === 'string' ? error.code : ''
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new RunnerError('FRAME_TOO_LARGE', 'the request body is too large')
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new RunnerError('BAD_REQUEST', 'unsupported content type; send application/json')
  }
  if (code.startsWith('FST_ERR_CTP') || code === 'FST_ERR_VALIDATION' || error.statusCode === 400) {
    return new RunnerError('BAD_REQUEST', 'the request body is not valid JSON')
  }
  return new RunnerError('INTERNAL', 'the runner hit an unexpected error; see its log')
}

/**
 * Builds the runner app (synchronously: plugins load on `ready()`/`listen`, which also reconnect
 * to stored sandboxes). The instance is thenable, so it is returned from a plain function.
 */
export function buildApp(options: BuildAppOptions): RunnerApp {
  const limits = defaultLimits(options.limits)
  const headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs)
  const app = Fastify({
    logger: options.logger ?? false,
    logController: new RequestLogController(),
    requestIdHeader: 'x-request-id',
    bodyLimit: 8 * 1024 * 1024,
    forceCloseConnections: true,
    // A request to a sandbox port's preview host is routed as its path form.
    rewriteUrl: (request) =>
      previewRewrite(request, options.network?.previewDomain ?? null, () =>
        (manager?.list() ?? []).map((s) => s.id),
      ) ??
      request.url ??
      '/',
    // No idle timeout while a request is being answered: a buffered run may be silent for up to
    // maxCommandTimeoutMs. Slow or never-finished requests are bounded by the header and request
    // timeouts, idle keep-alive connections by the keep-alive timeout, and connections that never
    // authenticate by the connection guard.
    connectionTimeout: 0,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    http: {
      headersTimeout,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // Node checks the header and request timeouts on this interval; a quarter of the shorter
      // one keeps the overshoot small.
      connectionsCheckingInterval: Math.min(5_000, Math.max(25, Math.floor(headersTimeout / 4))),
    },
  })
  // Many HTTP clients send `content-type: application/json` on every request, bodiless DELETEs
  // included; an empty JSON body is read as no body, and each route's schema decides.
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8')
    if (text.trim() === '') {
      done(null, undefined)
      return
    }
    try {
      done(null, JSON.parse(text))
    } catch {
      done(new RunnerError('BAD_REQUEST', 'the request body is not valid JSON'), undefined)
    }
  })
  const now = options.now ?? Date.now
  const openFileLimit = options.openFileLimit === undefined ? readOpenFileLimit() : options.openFileLimit
  const maxConnections = connectionCap(limits.maxConnections, openFileLimit, limits.maxSandboxes)
  if (maxConnections < limits.maxConnections) {
    app.log.warn(
      { maxConnections, configured: limits.maxConnections, openFileLimit },
      `the open-file limit (${openFileLimit}) allows ${maxConnections} connections; raise the runner's hard limit (LimitNOFILE=, --ulimit nofile=, ulimit -Hn) for more`,
    )
  }
  new ConnectionGuard({
    maxConnections,
    maxConnectionsPerClient: limits.maxConnectionsPerClient,
    unauthenticatedTimeoutMs: limits.unauthenticatedTimeoutMs,
    log: app.log,
  }).attach(app.server)
  const drivers = new Map(options.drivers.map((d) => [d.name, d]))
  const defaultDriver = options.defaultDriver ?? options.drivers[0]?.name ?? 'local'
  let manager: SandboxManager | null = null
  const metrics = new RunnerMetrics({
    sandboxes: () => manager?.countByStatus() ?? {},
    sessions: () => options.store.countAllSessions(),
    warmPool: () => manager?.pool.readyByDriver() ?? {},
  })
  const snapshots = options.snapshotStore
    ? new SandboxSnapshots(options.snapshotStore, app.log, options.snapshotOverlay)
    : undefined
  manager = new SandboxManager({
    ...(snapshots ? { snapshots } : {}),
    store: options.store,
    drivers,
    defaultDriver,
    limits,
    logger: app.log,
    metrics,
    now,
    shard: options.shard ?? null,
    warmPool: options.warmPool ?? 0,
    ...(options.availableMemoryBytes ? { availableMemoryBytes: options.availableMemoryBytes } : {}),
  })
  const egressProxy = new EgressProxy({
    resolver: options.network?.egressResolver ?? systemResolver,
    screen: new AddressScreen(options.network?.egressPermit ?? [], () =>
      listeningAddresses(app.server.address()),
    ),
    logger: app.log,
    onBytes: (_sandboxId, direction, bytes) => metrics.egressBytes.inc({ direction }, bytes),
    ...(options.network?.egressUpstreamCa ? { upstreamCa: options.network.egressUpstreamCa } : {}),
  })
  const netLimits = new SandboxNetworkLimits({
    maxConnections: limits.maxNetworkConnectionsPerSandbox,
    bandwidthBytesPerSecond: limits.sandboxBandwidthBytesPerSecond,
  })
  const egress = new EgressGateway({
    limits: netLimits,
    proxy: egressProxy,
    manager,
    store: options.store,
    logger: app.log,
    ...(options.network?.egressCredentials ? { credentials: options.network.egressCredentials } : {}),
  })
  const ctx: RunnerContext = {
    manager,
    store: options.store,
    limits,
    metrics,
    now,
    version: RUNNER_VERSION,
    apiKeyHashes: options.apiKeyHashes,
    shard: options.shard ?? null,
    ...(snapshots ? { snapshots } : {}),
    ...(options.network ? { network: options.network } : {}),
    egress,
    exposures: new PortExposures(options.store, limits.maxExposedPortsPerSandbox, now),
    netLimits,
  }
  // Every way a sandbox goes (the API, an idle lifetime) drops its network state with it.
  manager.onDestroyed((sandboxId) => {
    egress.forget(sandboxId)
    ctx.exposures.forget(sandboxId)
    netLimits.forget(sandboxId)
  })

  app.setErrorHandler((error, request, reply) => {
    const e = error instanceof RunnerError ? error : errorCodeOf(error as { code?: unknown })
    if (e.code === 'INTERNAL') request.log.error({ err: error }, 'request failed')
    metrics.errors.inc({ code: e.code })
    reply.header('x-conch-protocol', String(PROTOCOL_VERSION))
    return reply.code(e.status).send(e.toBody())
  })
  app.setNotFoundHandler((request, reply) => {
    metrics.errors.inc({ code: 'NOT_FOUND' })
    return reply
      .code(404)
      .send(
        new RunnerError(
          'NOT_FOUND',
          `no route ${request.method} ${request.url.split('?')[0]}; see /v1/openapi.json`,
        ).toBody(),
      )
  })

  void app.register(corsPlugin, { origins: options.corsOrigins ?? [] })
  void app.register(authPlugin, ctx)
  void app.register(healthPlugin, ctx)
  void app.register(openapiPlugin, ctx)
  void app.register(metricsPlugin, ctx)
  void app.register(sandboxesPlugin, ctx)
  void app.register(sessionsPlugin, ctx)
  void app.register(terminalsPlugin, ctx)
  void app.register(consolePlugin)
  void app.register(execPlugin, ctx)
  void app.register(processesPlugin, ctx)
  void app.register(filesPlugin, ctx)
  void app.register(shellSocketPlugin, ctx)
  void app.register(snapshotsPlugin, ctx)
  void app.register(portsPlugin, ctx)

  app.addHook('onReady', async () => {
    await ctx.manager.restore()
    await egress.restore()
  })
  app.addHook('onClose', async () => {
    egress.close()
    egressProxy.close()
    await ctx.manager.close()
  })
  return Object.assign(app, { conch: ctx })
}
