// conch's MCP server over streamable HTTP, for remote agents. Every request carries the caller's
// conch credential (the runner's API key or a sandbox token) as `Authorization: Bearer`; the
// server keeps no credential of its own. An MCP session is bound to the credential that opened
// it: a request with another credential, or none, is refused before it reaches a tool. The
// runner checks the credential at initialize, so a stranger cannot make the server hold
// sessions, and on every tool call, so a revoked token stops working at once.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ConchError, Sandbox } from '@conch/sdk'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js'
import { type ConchMcpServer, type ConchMcpServerOptions, createConchMcpServer } from './mcp-server.ts'

/** How to serve MCP over HTTP. */
export interface McpHttpOptions extends Omit<ConchMcpServerOptions, 'apiKey' | 'token'> {
  /** Interface to listen on; default loopback. */
  host?: string
  /** Port; 0 picks a free one. */
  port?: number
  /** MCP sessions held at once; an initialize beyond it gets 503. */
  maxSessions?: number
  /** A session without requests for this long is closed. */
  sessionIdleMs?: number
  /** Largest request body accepted. */
  maxBodyBytes?: number
}

/** A listening MCP HTTP server. */
export interface ConchMcpHttpServer {
  /** The MCP endpoint, `http://host:port/mcp`. */
  readonly url: string
  /** Sessions open now. */
  readonly sessionCount: number
  close(): Promise<void>
}

/** The MCP endpoint's path. */
export const MCP_PATH = '/mcp'

interface HttpSession {
  readonly credentialHash: Buffer
  readonly transport: StreamableHTTPServerTransport
  readonly mcp: ConchMcpServer
  lastUsed: number
}

/** Starts the HTTP server; resolves once it listens. */
export async function startMcpHttpServer(options: McpHttpOptions): Promise<ConchMcpHttpServer> {
  const maxSessions = options.maxSessions ?? 64
  const idleMs = options.sessionIdleMs ?? 30 * 60_000
  const maxBody = options.maxBodyBytes ?? 16 * 1024 * 1024
  const sessions = new Map<string, HttpSession>()

  const closeSession = async (id: string): Promise<void> => {
    const session = sessions.get(id)
    if (!session) return
    sessions.delete(id)
    await session.mcp.close().catch(() => {})
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://host').pathname
    if (path !== MCP_PATH) return reply(res, 404, `not found; the MCP endpoint is ${MCP_PATH}`)
    const credential = bearer(req)
    if (credential === null) {
      res.setHeader('www-authenticate', 'Bearer realm="conch"')
      return reply(
        res,
        401,
        'missing credentials; send Authorization: Bearer <conch API key or sandbox token>',
      )
    }
    const body = req.method === 'POST' ? await readJson(req, maxBody) : undefined
    if (body === TOO_LARGE) {
      // The rest of the body is never read: the connection cannot carry another request.
      res.setHeader('connection', 'close')
      return reply(res, 413, `the request body exceeds ${maxBody} bytes`)
    }
    if (body === BAD_JSON) return reply(res, 400, 'the request body is not JSON')

    const sessionId = req.headers['mcp-session-id']
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId)
      // An unknown session and a session of another credential look the same to the caller.
      if (!session || !sameHash(session.credentialHash, hash(credential))) {
        return reply(res, 404, 'unknown MCP session; initialize a new one')
      }
      session.lastUsed = Date.now()
      return session.transport.handleRequest(req, res, body)
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      return reply(res, 400, 'no MCP session; send an initialize request first')
    }
    if (sessions.size >= maxSessions) {
      return reply(
        res,
        503,
        `the server holds ${maxSessions} MCP sessions; close one (DELETE ${MCP_PATH}) and retry`,
      )
    }
    const refusal = await checkCredential(options.url, credential)
    if (refusal) return reply(res, 401, refusal)

    const mcp = createConchMcpServer({ ...options, ...credentialOptions(credential) })
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { credentialHash: hash(credential), transport, mcp, lastUsed: Date.now() })
      },
      onsessionclosed: (id) => closeSession(id),
    })
    transport.onclose = () => {
      if (transport.sessionId) void closeSession(transport.sessionId)
    }
    await mcp.server.connect(transport)
    await transport.handleRequest(req, res, body)
  }

  const http: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) reply(res, 500, err instanceof Error ? err.message : String(err))
      else res.destroy()
    })
  })
  const sweep = setInterval(
    () => {
      const now = Date.now()
      for (const [id, session] of sessions) if (now - session.lastUsed > idleMs) void closeSession(id)
    },
    Math.min(idleMs, 60_000),
  )
  sweep.unref()

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject)
    http.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve())
  })
  const address = http.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${host}:${address.port}${MCP_PATH}`,
    get sessionCount() {
      return sessions.size
    },
    async close() {
      clearInterval(sweep)
      await Promise.all([...sessions.keys()].map(closeSession))
      http.closeAllConnections()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    },
  }
}

/** The bearer secret of a request, or null. */
function bearer(req: IncomingMessage): string | null {
  const match = /^Bearer ([\x21-\x7e]{1,512})$/.exec(req.headers.authorization ?? '')
  return match ? (match[1] as string) : null
}

/** The SDK option a secret belongs in: sandbox tokens start with `cst_`. */
function credentialOptions(secret: string): { apiKey?: string; token?: string } {
  return secret.startsWith('cst_') ? { token: secret } : { apiKey: secret }
}

/**
 * Asks the runner whether it knows the credential: listing sandboxes succeeds with the API key
 * and is forbidden (not unauthorized) with a valid sandbox token. Returns why it was refused.
 */
async function checkCredential(url: string, secret: string): Promise<string | null> {
  try {
    await Sandbox.list({ url, ...credentialOptions(secret) })
    return null
  } catch (err) {
    if (err instanceof ConchError && err.code === 'FORBIDDEN') return null
    if (err instanceof ConchError && err.code === 'UNAUTHORIZED')
      return `the runner refused the credential: ${err.message}`
    throw err
  }
}

function hash(secret: string): Buffer {
  return createHash('sha256').update(secret).digest()
}

function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

const TOO_LARGE = Symbol('too large')
const BAD_JSON = Symbol('bad json')

/** Reads a JSON body of at most `max` bytes. */
async function readJson(req: IncomingMessage, max: number): Promise<unknown> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > max) return TOO_LARGE
    chunks.push(chunk)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    return BAD_JSON
  }
}

/** A JSON-RPC error answer, as MCP clients expect from the endpoint. */
function reply(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }))
}
