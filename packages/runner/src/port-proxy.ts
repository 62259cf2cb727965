// The HTTP and WebSocket relay between a client of the runner and a server inside a sandbox.
//
// Model: the client's request has already been parsed by the runner's own HTTP server (which
// refuses malformed framing, such as both Content-Length and Transfer-Encoding), so it is
// re-serialised here by Node's HTTP client onto a fresh TCP stream that the agent relays from
// 127.0.0.1:<port> inside the sandbox: the sandbox server never sees the client's bytes as they
// came, only one well-framed request. The runner's credentials (its Authorization header when it
// was the credential, the port token in the query or the cookie) are removed first, so a sandbox
// server never learns a secret. Bodies stream both ways with backpressure; the response's head
// is capped (`maxHeaderBytes`), so a server that sends endless headers gets the client a 502.
// An `Upgrade` request (WebSocket) is relayed as bytes once the sandbox server answers 101.
import type { Agent, ClientRequest, IncomingHttpHeaders, IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { pipeline } from 'node:stream'
import { PORT_TOKEN_COOKIE } from '@conch/protocol'
import { HOP_BY_HOP } from './hop-by-hop-headers.ts'
import { request } from './node-http.ts'
import { relayedSetCookie } from './relayed-set-cookie.ts'
import { RunnerError } from './runner-error.ts'

/** Largest response head a sandbox server may send. */
export const MAX_RESPONSE_HEAD_BYTES = 16 * 1024

/** One request to relay. */
export interface ProxyTarget {
  /** The sandbox port. */
  port: number
  /** Path and query to send to the sandbox server, starting with `/`. */
  path: string
  /** Drop the client's Authorization header (it was the runner's credential). */
  stripAuthorization: boolean
  /** Headers added to the response (the path form's content security policy). */
  responseHeaders: Readonly<Record<string, string>>
  /** Where the client reached the runner, for X-Forwarded-*. */
  forwarded: { host: string; proto: string; prefix: string; for: string }
}

/** The headers sent to the sandbox server. */
export function upstreamHeaders(
  headers: IncomingHttpHeaders,
  target: ProxyTarget,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  const connectionTokens = String(headers.connection ?? '')
    .toLowerCase()
    .split(',')
    .map((t) => t.trim())
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || connectionTokens.includes(name)) continue
    if (name === 'authorization' && target.stripAuthorization) continue
    if (name === 'cookie') {
      const kept = withoutPortCookie(Array.isArray(value) ? value.join('; ') : value)
      if (kept) out.cookie = kept
      continue
    }
    if (name.startsWith('x-forwarded-')) continue
    out[name] = value
  }
  out.host = `localhost:${target.port}`
  out['x-forwarded-host'] = target.forwarded.host
  out['x-forwarded-proto'] = target.forwarded.proto
  out['x-forwarded-prefix'] = target.forwarded.prefix
  out['x-forwarded-for'] = target.forwarded.for
  return out
}

/** A Cookie header without the runner's port-token cookie. */
export function withoutPortCookie(cookie: string): string {
  return cookie
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c !== '' && c.split('=')[0]?.trim() !== PORT_TOKEN_COOKIE)
    .join('; ')
}

function downstreamHeaders(
  response: IncomingMessage,
  extra: Readonly<Record<string, string>>,
  cookiePrefix: string,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  const connectionTokens = String(response.headers.connection ?? '')
    .toLowerCase()
    .split(',')
    .map((t) => t.trim())
  for (const [name, value] of Object.entries(response.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || connectionTokens.includes(name)) continue
    if (ORIGIN_WIDE.has(name)) continue
    if (name === 'set-cookie') {
      // Cookies for this port only, and never the runner's own (`relayed-set-cookie.ts`).
      const kept = relayedSetCookie(Array.isArray(value) ? value : [value], cookiePrefix)
      if (kept.length > 0) out[name] = kept
      continue
    }
    out[name] = value
  }
  return { ...out, ...extra }
}

/**
 * Response headers that act on a whole origin or registrable domain rather than on the response:
 * relayed from a sandbox server they would let one app wipe every cookie and storage of the
 * runner's domain (and its siblings', `Clear-Site-Data`), pin HTTPS on the runner's host and its
 * subdomains (`Strict-Transport-Security`), or send the browser elsewhere for the runner's origin
 * (`Alt-Svc`). They are the operator's to set, in front of the runner, never a sandbox's.
 */
const ORIGIN_WIDE: ReadonlySet<string> = new Set(['clear-site-data', 'strict-transport-security', 'alt-svc'])

/** How a relayed request reaches the sandbox: its own connection, or a keep-alive pool. */
export type Upstream = { stream: Duplex } | { agent: Agent }

function upstreamRequest(
  client: IncomingMessage,
  via: Upstream,
  target: ProxyTarget,
  upgrade: boolean,
): ClientRequest {
  const headers = upstreamHeaders(client.headers, target)
  if (upgrade) {
    headers.connection = 'Upgrade'
    headers.upgrade = String(client.headers.upgrade)
  }
  return request({
    method: client.method ?? 'GET',
    path: target.path,
    headers,
    ...('agent' in via
      ? { agent: via.agent }
      : { createConnection: () => via.stream as Socket, agent: undefined }),
    maxHeaderSize: MAX_RESPONSE_HEAD_BYTES,
    setHost: false,
  })
}

function badGateway(error: Error): RunnerError {
  if (error instanceof RunnerError) return error
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'HPE_HEADER_OVERFLOW')
    return new RunnerError(
      'CONNECTION_LOST',
      `the sandbox server sent a response head over ${MAX_RESPONSE_HEAD_BYTES} bytes; the runner refused it`,
    )
  return new RunnerError(
    'CONNECTION_LOST',
    `the sandbox server's answer was cut off or malformed (${code ?? error.message}); check the server`,
  )
}

/**
 * Relays one HTTP request. Resolves once the response has been sent or the exchange failed;
 * it never throws after the response has started (the client connection is cut instead).
 */
export function proxyHttp(
  client: IncomingMessage,
  reply: import('node:http').ServerResponse,
  via: Upstream,
  target: ProxyTarget,
): Promise<void> {
  // A pooled connection is the pool's to keep or close; an own connection ends with the exchange.
  const release = (): void => {
    if ('stream' in via) via.stream.destroy()
  }
  // A kept-alive connection the server closed just as it was reused fails before any answer;
  // a bodiless GET, HEAD or OPTIONS is then sent once more on a fresh connection (Node's advice
  // for `reusedSocket`). Anything else could have had an effect, and gets the 502.
  const retryable =
    'agent' in via &&
    ['GET', 'HEAD', 'OPTIONS'].includes(client.method ?? '') &&
    client.headers['content-length'] === undefined &&
    client.headers['transfer-encoding'] === undefined
  return new Promise((resolve) => {
    let answered = false
    let current: ClientRequest
    const attempt = (retriesLeft: number): void => {
      const upstream = upstreamRequest(client, via, target, false)
      current = upstream
      upstream.on('response', (response) => {
        answered = true
        // The client left in the same turn as the answer came (piping into it would throw).
        if (reply.destroyed) {
          upstream.destroy()
          release()
          resolve()
          return
        }
        reply.writeHead(
          response.statusCode ?? 502,
          response.statusMessage,
          downstreamHeaders(response, target.responseHeaders, target.forwarded.prefix),
        )
        pipeline(response, reply, (error) => {
          if (error) upstream.destroy()
          release()
          resolve()
        })
      })
      upstream.on('error', (error) => {
        if (!answered && retriesLeft > 0 && upstream.reusedSocket && !reply.destroyed) {
          attempt(retriesLeft - 1)
          return
        }
        release()
        if (answered || reply.headersSent) {
          reply.destroy()
          resolve()
          return
        }
        const e = badGateway(error)
        // Refusals before any byte reached the server keep their own status; a bad answer is a 502.
        reply.writeHead(error instanceof RunnerError ? e.status : 502, {
          'content-type': 'application/json; charset=utf-8',
          ...target.responseHeaders,
        })
        reply.end(JSON.stringify(e.toBody()))
        resolve()
      })
      if (retryable) upstream.end()
      else
        pipeline(client, upstream, (error) => {
          if (error) upstream.destroy()
        })
    }
    attempt(retryable ? 1 : 0)
    reply.on('close', () => {
      if (!reply.writableFinished) {
        current.destroy()
        release()
        resolve()
      }
    })
  })
}

/**
 * Relays an Upgrade request (a WebSocket): the sandbox server's 101 and everything after it
 * go to `socket` byte for byte; any other answer is written as a plain response and closes.
 */
export function proxyUpgrade(
  client: IncomingMessage,
  socket: Socket,
  head: Buffer,
  stream: Duplex,
  target: ProxyTarget,
): void {
  const upstream = upstreamRequest(client, { stream }, target, true)
  const fail = (status: number, body: string): void => {
    if (!socket.destroyed)
      socket.end(
        `HTTP/1.1 ${status} Bad Gateway\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      )
    stream.destroy()
  }
  upstream.on('upgrade', (response, upSocket, upHead) => {
    if (socket.destroyed) {
      upSocket.destroy()
      return
    }
    const lines = [`HTTP/1.1 101 ${response.statusMessage || 'Switching Protocols'}`]
    const headers = downstreamHeaders(response, {}, target.forwarded.prefix)
    headers.connection = 'Upgrade'
    headers.upgrade = String(response.headers.upgrade ?? 'websocket')
    for (const [name, value] of Object.entries(headers))
      for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`)
    socket.write(`${lines.join('\r\n')}\r\n\r\n`)
    if (upHead.byteLength > 0) socket.write(upHead)
    if (head.byteLength > 0) upSocket.write(head)
    pipeline(upSocket, socket, () => upSocket.destroy())
    pipeline(socket, upSocket, () => socket.destroy())
  })
  upstream.on('response', (response) => {
    if (socket.destroyed) {
      stream.destroy()
      return
    }
    const headers = downstreamHeaders(response, target.responseHeaders, target.forwarded.prefix)
    const lines = [`HTTP/1.1 ${response.statusCode ?? 502} ${response.statusMessage ?? ''}`]
    for (const [name, value] of Object.entries(headers))
      for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`)
    lines.push('connection: close')
    socket.write(`${lines.join('\r\n')}\r\n\r\n`)
    pipeline(response, socket, () => stream.destroy())
  })
  upstream.on('error', (error) => fail(502, JSON.stringify(badGateway(error).toBody())))
  socket.on('close', () => {
    upstream.destroy()
    stream.destroy()
  })
  upstream.end()
}
