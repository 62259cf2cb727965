// Authentication and scoping. Every route but the public ones needs a bearer secret: the API key
// (full access) or a sandbox-scoped token (`cst_…`), which works only on routes and sockets of its
// own sandbox and never on listing or creating sandboxes or minting tokens. The secret comes from
// `Authorization: Bearer …`, or for the shell WebSocket from a `bearer.<secret>` subprotocol.
// Secrets are hashed and compared in constant time; they are never logged.
import { BEARER_SUBPROTOCOL_PREFIX, SANDBOX_TOKEN_PREFIX } from '@conch/protocol'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { markAuthenticated } from '../connection-guard.ts'
import { hashesEqual, hashSecret, matchesAnyHash } from '../credentials.ts'
import type { Access } from '../route-table.ts'
import type { RunnerContext } from '../runner-context.ts'
import { RunnerError } from '../runner-error.ts'

/** Who a request acts as. */
export type Principal = { kind: 'key' } | { kind: 'token'; sandboxId: string; expiresAt: number }

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route. */
    access?: Access
    /** The protocol operationId. */
    operationId?: string
  }
  interface FastifyRequest {
    /** The authenticated caller, set by the auth hook. */
    principal: Principal | null
  }
}

/** The bearer secret of a request: the Authorization header, else a `bearer.` subprotocol. */
export function bearerSecret(request: FastifyRequest): string | null {
  const header = request.headers.authorization
  if (typeof header === 'string') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
    return match ? match[1]! : null
  }
  const protocols = request.headers['sec-websocket-protocol']
  if (typeof protocols === 'string') {
    for (const p of protocols.split(',')) {
      const name = p.trim()
      if (name.startsWith(BEARER_SUBPROTOCOL_PREFIX)) return name.slice(BEARER_SUBPROTOCOL_PREFIX.length)
    }
  }
  return null
}

/** Resolves a secret to a principal, or throws UNAUTHORIZED. */
export function authenticate(ctx: RunnerContext, secret: string | null): Principal {
  if (!secret) {
    throw new RunnerError(
      'UNAUTHORIZED',
      'missing credentials; send Authorization: Bearer <API key or sandbox token>',
    )
  }
  if (secret.startsWith(SANDBOX_TOKEN_PREFIX)) {
    const hash = hashSecret(secret)
    const token = ctx.store.getToken(hash)
    if (!token || !hashesEqual(hash, token.hash)) {
      throw new RunnerError(
        'UNAUTHORIZED',
        'unknown sandbox token; mint a new one with POST /v1/sandboxes/:id/tokens',
      )
    }
    if (token.expiresAt <= ctx.now()) {
      throw new RunnerError('UNAUTHORIZED', 'the sandbox token has expired')
    }
    return { kind: 'token', sandboxId: token.sandboxId, expiresAt: token.expiresAt }
  }
  if (matchesAnyHash(secret, ctx.apiKeyHashes)) return { kind: 'key' }
  throw new RunnerError(
    'UNAUTHORIZED',
    'invalid API key; use the key the runner printed on first start or CONCH_API_KEY',
  )
}

/** Checks that a principal may use a route of `access` on sandbox `sandboxId`. */
export function authorize(principal: Principal, access: Access, sandboxId: string | undefined): void {
  if (principal.kind === 'key' || access === 'public' || access === 'any') return
  if (access === 'admin') {
    throw new RunnerError(
      'FORBIDDEN',
      'a sandbox token cannot list or create sandboxes or mint tokens; use the API key',
    )
  }
  if (sandboxId !== principal.sandboxId) {
    throw new RunnerError(
      'FORBIDDEN',
      `this token is scoped to sandbox ${principal.sandboxId}, not ${sandboxId ?? 'this route'}`,
    )
  }
}

/** Registers the auth hook on the whole app (not encapsulated). */
export async function authPlugin(app: FastifyInstance, ctx: RunnerContext): Promise<void> {
  app.decorateRequest('principal', null)
  app.addHook('onRequest', async (request) => {
    if (request.is404) return
    const access = request.routeOptions.config.access ?? 'admin'
    if (access === 'public') return
    const principal = authenticate(ctx, bearerSecret(request))
    const params = request.params as Record<string, string | undefined> | undefined
    authorize(principal, access, params?.id)
    request.principal = principal
    // The connection has proved a credential, so the guard's unauthenticated deadline lifts.
    markAuthenticated(request.raw.socket)
  })
}
// Share the hook with sibling plugins instead of encapsulating it (what fastify-plugin does).
Object.assign(authPlugin, { [Symbol.for('skip-override')]: true })
