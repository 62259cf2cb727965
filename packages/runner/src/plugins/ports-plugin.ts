// Ports: discovery (`GET /v1/sandboxes/:id/ports`), exposure (`POST …/exposed-ports/:port`, which
// mints a per-port token, and `DELETE` to end it) and the relay itself, `/v1/sandboxes/:id/ports/:port/…` for every
// method and for WebSocket upgrades.
//
// Who may pass the relay: the API key or a token of that sandbox (Authorization: Bearer), a
// port token for that sandbox and port (query `conch_port_token` on a browser's first visit,
// which is traded for an HttpOnly cookie scoped to the port's path and a redirect that drops it
// from the URL; then the cookie), or anyone when the port was exposed `public` and the operator
// allows public ports. A port token and public access work only while the port is exposed
// (`port-exposures.ts`: `DELETE …/exposed-ports/:port` revokes them, and cuts the WebSockets
// they opened, `credential-bound-sockets.ts`); exposures and relayed
// connections count against the sandbox's limits (`sandbox-network-limits.ts`). The relayed path is whatever follows `/ports/:port`: it can only ever
// reach that port of that sandbox, `..` included, since the route was chosen before. Pages
// served on the path form share the runner's origin, so they get a `sandbox` content security
// policy (an opaque origin: no access to the runner's or other sandboxes' cookies and storage);
// a preview domain gives each port its own origin instead.
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import { PassThrough } from 'node:stream'
import { LIMITS, PORT_TOKEN_COOKIE, PORT_TOKEN_PREFIX, PORT_TOKEN_QUERY, PortSegment } from '@conch/protocol'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { markAuthenticated } from '../connection-guard.ts'
import { CredentialBoundSockets } from '../credential-bound-sockets.ts'
import type { NetworkOptions } from '../network-options.ts'
import { type ProxyTarget, proxyHttp, proxyUpgrade } from '../port-proxy.ts'
import { PortTokens, takeQueryToken } from '../port-token.ts'
import { PortWatch } from '../port-watch.ts'
import { isPreviewRequest } from '../preview-host.ts'
import { bindRoutes } from '../route-table.ts'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'
import { SandboxPortAgent } from '../sandbox-port-agent.ts'
import { openSandboxTcp, type SandboxTcpStream } from '../sandbox-tcp-stream.ts'
import { authenticate, authorize } from './auth-plugin.ts'

/** The policy that makes a page on the runner's own origin an opaque origin. */
export const PATH_FORM_CSP =
  'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads allow-presentation'

interface RelayRequest {
  sandboxId: string
  port: number
  /** Path and query for the sandbox server. */
  path: string
  /** The path prefix the client used (`/v1/sandboxes/:id/ports/:port`, or '' on a preview host). */
  prefix: string
}

/** Ports: list, expose, relay. */
export async function portsPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  const options: NetworkOptions = ctx.network ?? { allowPublicPorts: false, previewDomain: null }
  const tokens = new PortTokens(ctx.store.runnerSecret('port-token'))
  /** Keep-alive pools by `<sandbox>:<port>`, each tied to the link its connections use. */
  const pools = new Map<string, { pool: SandboxPortAgent; link: unknown }>()
  app.addHook('onClose', async () => {
    for (const { pool } of pools.values()) pool.destroy()
  })

  const watches = new Map<string, PortWatch>()
  /** Relayed WebSockets cut when the credential that opened them ends. */
  const bound = new CredentialBoundSockets()
  app.addHook('onClose', async () => bound.close())
  // A relayed upgrade is a hijacked socket the HTTP server no longer answers for, but its close
  // still waits for it: cut every one at shutdown, or an open WebSocket holds the runner open.
  const upgraded = new Set<Socket>()
  app.addHook('preClose', async () => {
    for (const socket of upgraded) socket.destroy()
  })

  bindRoutes(app, {
    watchPorts: async ({ params, request, reply }) => {
      const sandbox = ctx.manager.get(params.id)
      let watch = watches.get(sandbox.id)
      if (!watch) {
        watch = new PortWatch(
          async () => (await (await sandbox.link()).call('ports.list', {}, { timeoutMs: 10_000 })).ports,
        )
        watches.set(sandbox.id, watch)
      }
      const out = new PassThrough()
      const current = watch
      const unsubscribe = await current.subscribe((event) => {
        if (event === null) out.end()
        else out.write(`${JSON.stringify(event)}\n`)
      })
      const stop = (): void => {
        unsubscribe()
        if (current.idle && watches.get(sandbox.id) === current) watches.delete(sandbox.id)
      }
      request.raw.on('close', stop)
      out.on('close', stop)
      reply.type('application/x-ndjson')
      return reply.send(out)
    },
    listPorts: async ({ params }) => {
      const link = await ctx.manager.get(params.id).link()
      return link.call('ports.list', {}, { timeoutMs: 10_000 })
    },
    exposePort: async ({ params, body }) => {
      const sandbox = ctx.manager.get(params.id)
      const ttlMs = body.ttlMs ?? LIMITS.defaultTokenTtlMs
      if (ttlMs > LIMITS.maxTokenTtlMs)
        throw new RunnerError(
          'BAD_REQUEST',
          `ttlMs ${ttlMs} exceeds the maximum of ${LIMITS.maxTokenTtlMs} ms (24 h)`,
        )
      if (body.public === true && !options.allowPublicPorts)
        throw new RunnerError(
          'FORBIDDEN',
          'this runner does not allow public ports; expose the port without public and hand out its token, or start the runner with --allow-public-ports',
        )
      const expiresAt = ctx.now() + ttlMs
      const exposure = ctx.exposures.expose(sandbox.id, params.port, {
        expiresAt,
        public: body.public === true,
      })
      const token = tokens.mint({ sandboxId: sandbox.id, port: params.port, expiresAt }, exposure.epoch)
      const path = `/v1/sandboxes/${sandbox.id}/ports/${params.port}/?${PORT_TOKEN_QUERY}=${token}`
      const previewUrl = options.previewDomain
        ? `https://${params.port}-${sandbox.id.toLowerCase()}.${options.previewDomain}/?${PORT_TOKEN_QUERY}=${token}`
        : null
      return {
        sandboxId: sandbox.id,
        port: params.port,
        path,
        previewUrl,
        token,
        expiresAt,
        public: body.public === true,
      }
    },
    unexposePort: async ({ params }) => {
      const sandbox = ctx.manager.get(params.id)
      ctx.exposures.unexpose(sandbox.id, params.port)
      bound.check()
      return { ok: true as const }
    },
  })

  /**
   * Checks the caller's credential for one port. Says whether Authorization was it, and how to
   * tell later that the credential still holds (null for the API key, which does not end).
   */
  const admit = (
    request: FastifyRequest,
    target: RelayRequest,
    queryToken: string | null,
  ): { usedAuthorization: boolean; stillValid: (() => boolean) | null } => {
    const header = request.headers.authorization
    const bearer = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined
    // An Authorization header may be the sandbox app's own; it is the runner's only when it
    // authenticates here, and only then is it kept from the sandbox server.
    let bearerError: unknown = null
    if (bearer && !bearer.startsWith(PORT_TOKEN_PREFIX)) {
      try {
        const principal = authenticate(ctx, bearer)
        authorize(principal, 'sandbox', target.sandboxId)
        const stillValid = principal.kind === 'token' ? () => ctx.now() < principal.expiresAt : null
        return { usedAuthorization: true, stillValid }
      } catch (error) {
        bearerError = error
      }
    }
    // A port token or public access opens the port only while it is exposed (until unexposed).
    const exposure = ctx.exposures.get(target.sandboxId, target.port)
    // Every cookie of the name: a sibling preview host's page can set one on the parent domain,
    // which the browser may send before this host's own.
    const candidates = [bearer, queryToken, ...cookieValues(request.headers.cookie, PORT_TOKEN_COOKIE)]
    for (const token of candidates) {
      if (
        exposure &&
        token?.startsWith(PORT_TOKEN_PREFIX) &&
        tokens.verify(token, target.sandboxId, target.port, ctx.now(), exposure.epoch)
      )
        return {
          usedAuthorization: bearer === token,
          stillValid: () => {
            const current = ctx.exposures.get(target.sandboxId, target.port)
            return (
              current !== null &&
              tokens.verify(token, target.sandboxId, target.port, ctx.now(), current.epoch)
            )
          },
        }
    }
    if (exposure?.public)
      return {
        usedAuthorization: false,
        stillValid: () => ctx.exposures.get(target.sandboxId, target.port)?.public === true,
      }
    if (bearerError) throw bearerError
    const tried = candidates.some((t) => t)
    throw new RunnerError(
      'UNAUTHORIZED',
      tried
        ? `the credential does not open port ${target.port} of sandbox ${target.sandboxId} (wrong sandbox or port, or expired); expose the port again for a new token`
        : `port ${target.port} of sandbox ${target.sandboxId} needs a credential: Authorization: Bearer <API key or sandbox token>, or the token from exposePort`,
    )
  }

  const relay = async (request: FastifyRequest, reply: FastifyReply, target: RelayRequest): Promise<void> => {
    const { path: forwardPath, token: queryToken } = takeQueryToken(target.path)
    const { usedAuthorization, stillValid } = admit(request, target, queryToken)
    markAuthenticated(request.raw.socket)
    if (queryToken !== null) {
      const method = request.method
      if ((method === 'GET' || method === 'HEAD') && !request.headers.upgrade) {
        const secure = forwardedProto(request) === 'https' ? '; Secure' : ''
        reply
          .code(303)
          .header(
            'set-cookie',
            `${PORT_TOKEN_COOKIE}=${queryToken}; Path=${target.prefix}/; HttpOnly; SameSite=Lax${secure}`,
          )
          .header('location', `${target.prefix}${forwardPath}`)
          .header('cache-control', 'no-store')
          .send()
        return
      }
    }
    const sandbox = ctx.manager.get(target.sandboxId)
    /** Opens a relayed connection, counted against the sandbox's cap until it closes. */
    const openStream = async (): Promise<SandboxTcpStream> => {
      const release = ctx.netLimits.acquire(sandbox.id, 'relayed')
      let stream: SandboxTcpStream
      try {
        stream = await openSandboxTcp(await sandbox.link(), target.port, {
          buckets: ctx.netLimits.buckets(sandbox.id),
        })
      } catch (error) {
        release()
        throw error
      }
      stream.once('close', release)
      return stream
    }
    const proxyTarget: ProxyTarget = {
      port: target.port,
      path: forwardPath,
      stripAuthorization: usedAuthorization,
      responseHeaders: target.prefix === '' ? {} : { 'content-security-policy': PATH_FORM_CSP },
      forwarded: {
        host: request.headers.host ?? '',
        proto: forwardedProto(request),
        prefix: target.prefix,
        for: request.ip,
      },
    }
    if (request.headers.upgrade) {
      const stream = await openStream()
      // A relayed WebSocket keeps its sandbox awake while open (sandbox-lifetimes.ts), and
      // lasts only as long as the credential that opened it.
      stream.once('close', sandbox.hold())
      if (stillValid) bound.add(stream, stillValid)
      reply.hijack()
      const client = request.raw.socket as Socket
      upgraded.add(client)
      client.once('close', () => upgraded.delete(client))
      proxyUpgrade(request.raw, client, upgradeHead(request.raw), stream, proxyTarget)
      return
    }
    if (pools.size > 1024) {
      const live = new Set(ctx.manager.list().map((s) => s.id))
      for (const [key, entry] of pools)
        if (!live.has(key.split(':')[0] ?? '')) {
          entry.pool.destroy()
          pools.delete(key)
        }
    }
    const poolKey = `${sandbox.id}:${target.port}`
    let agent = pools.get(poolKey)
    if (!agent || agent.link !== sandbox.currentLink) {
      agent?.pool.destroy()
      agent = { pool: new SandboxPortAgent(openStream), link: sandbox.currentLink }
      pools.set(poolKey, agent)
    }
    reply.hijack()
    // A request in flight keeps its sandbox awake; an idle pooled connection does not. A long
    // answer (server-sent events) ends with its credential, as a WebSocket does.
    const release = sandbox.hold()
    if (stillValid) bound.add(reply.raw, stillValid)
    try {
      await proxyHttp(request.raw, reply.raw, { agent: agent.pool }, proxyTarget)
    } finally {
      release()
    }
  }

  // The relay takes the body as the raw stream: no parser reads it, and no body limit applies
  // beyond the sandbox server's own.
  await app.register(async (relayApp) => {
    relayApp.removeAllContentTypeParsers()
    relayApp.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))
    const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
      const { id, port: portText } = request.params as { id: string; port: string }
      const port = PortSegment.safeParse(portText)
      if (!port.success)
        throw new RunnerError(
          'BAD_REQUEST',
          `"${portText.slice(0, 16)}" is not a port; use a number from 1 to 65535`,
        )
      // A preview host was rewritten onto this route (see `preview-host.ts`); its pages have an
      // origin of their own, so its prefix is empty and the original URL is the path.
      const preview = isPreviewRequest(request.raw)
      const prefix = preview ? '' : `/v1/sandboxes/${id}/ports/${portText}`
      const raw = request.raw.url ?? '/'
      // The route matched the decoded path; what follows the 6th segment of the raw one is the
      // sandbox server's path, sent as the client wrote it.
      const [pathPart, ...queryParts] = raw.split('?')
      const rest = (pathPart ?? '').split('/').slice(6).join('/')
      const query = queryParts.length > 0 ? `?${queryParts.join('?')}` : ''
      await relay(request, reply, { sandboxId: id, port: port.data, path: `/${rest}${query}`, prefix })
    }
    const config = { access: 'public' as const }
    relayApp.all('/v1/sandboxes/:id/ports/:port', { config }, handler)
    relayApp.all('/v1/sandboxes/:id/ports/:port/*', { config }, handler)
  })
}

/** The values of every cookie named `name`, in the order the client sent them (at most 8). */
function cookieValues(header: string | undefined, name: string): string[] {
  const values: string[] = []
  for (const part of (header ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=')
    if (k === name && values.length < 8) values.push(v.join('='))
  }
  return values
}

function forwardedProto(request: FastifyRequest): string {
  return request.protocol === 'https' ? 'https' : 'http'
}

/** Bytes that arrived after an upgrade request's head, kept by the WebSocket plugin. */
function upgradeHead(raw: IncomingMessage): Buffer {
  for (const symbol of Object.getOwnPropertySymbols(raw)) {
    if (symbol.description === 'ws-head') {
      const head = (raw as unknown as Record<symbol, unknown>)[symbol]
      if (Buffer.isBuffer(head)) return head
    }
  }
  return Buffer.alloc(0)
}
