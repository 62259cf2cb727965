// One HTTP request from the router to a runner. The method, path and headers are the client's
// (minus hop-by-hop headers, with the runner's own Host); the host, port and scheme come from the
// shard table only. A runner that cannot be reached, or does not connect in time, turns into
// RUNNER_UNAVAILABLE naming the shard; once a runner has answered, its answer is the client's.
// A body is either whole (a Buffer, sent on a pooled connection) or a stream (a sandbox port
// relay's upload), piped with backpressure on a connection of its own: a stream cannot be sent
// twice, so it is never retried on a stale pooled connection.
import {
  Agent,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  request,
} from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import type { Readable } from 'node:stream'
import { RouterError } from './router-error.ts'
import type { Shard } from './shard-table.ts'

/** Headers that describe one hop and are never forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
])

/** The client's headers that go on to the runner: all but the hop-by-hop ones. */
export function forwardableHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {}
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase()),
  )
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name)) continue
    out[name] = value
  }
  return out
}

/** Keep-alive connection pools, one per shard. */
export class UpstreamPool {
  readonly #agents = new Map<string, Agent>()

  /** The pool for `shard`. */
  agentFor(shard: Shard): Agent {
    let agent = this.#agents.get(shard.name)
    if (!agent) {
      const options = { keepAlive: true, maxFreeSockets: 64 }
      agent = shard.url.protocol === 'https:' ? new HttpsAgent(options) : new Agent(options)
      this.#agents.set(shard.name, agent)
    }
    return agent
  }

  /** Closes every pooled connection. */
  close(): void {
    for (const agent of this.#agents.values()) agent.destroy()
  }
}

/** What to send. */
export interface UpstreamCall {
  /** The shard to send it to. */
  shard: Shard
  /** HTTP method. */
  method: string
  /** Path and query, as the client sent them. */
  pathAndQuery: string
  /** Headers to send (already filtered). */
  headers: OutgoingHttpHeaders
  /** Host header to send; the shard's own when absent (only a preview host is passed on). */
  host?: string
  /** The body, if any: whole, or a stream piped as it arrives (the client's upload). */
  body: Buffer | Readable | undefined
  /** A streamed body's length (the client's content-length); chunked when absent. */
  bodyLength?: string
  /** Called once a streamed body's request to the runner is over, however it ended. */
  onStreamClosed?: () => void
  /** Connection pools. */
  pool: UpstreamPool
  /** Time to connect before the shard counts as unavailable. */
  connectTimeoutMs: number
  /** Aborts the call (the client went away). */
  signal?: AbortSignal
}

/** Error for a runner that could not be reached. */
export function unavailable(shard: Shard, why: string, cause?: unknown): RouterError {
  return new RouterError('RUNNER_UNAVAILABLE', `runner shard ${shard.name} is not answering (${why})`, {
    details: { shard: shard.name },
    cause,
  })
}

/**
 * Sends a request to a runner; resolves with its response head and streaming body. A pooled
 * connection that the runner closed while idle (a reset before any answer on a reused socket)
 * is retried once on a fresh connection, as Node's documentation advises. A streamed body goes
 * on a fresh connection and is never retried; if the client's stream ends early (the client
 * went away) the runner's request is destroyed, and if the runner goes away first the call
 * fails with RUNNER_UNAVAILABLE and the rest of the client's body is read and dropped.
 */
export async function callUpstream(call: UpstreamCall): Promise<IncomingMessage> {
  try {
    return await callOnce(call)
  } catch (error) {
    if (error instanceof StaleConnection) return await callOnce(call)
    throw error
  }
}

/** A reused keep-alive connection was reset before the runner answered. */
class StaleConnection extends Error {}

function callOnce(call: UpstreamCall): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const send = call.shard.url.protocol === 'https:' ? httpsRequest : request
    const headers: OutgoingHttpHeaders = { ...call.headers, host: call.host ?? call.shard.url.host }
    const stream = call.body !== undefined && !Buffer.isBuffer(call.body) ? call.body : null
    if (Buffer.isBuffer(call.body)) headers['content-length'] = call.body.length
    else if (stream && call.bodyLength !== undefined) headers['content-length'] = call.bodyLength
    else if (stream) headers['transfer-encoding'] = 'chunked'
    const req = send(
      {
        protocol: call.shard.url.protocol,
        hostname: call.shard.url.hostname.replace(/^\[|\]$/g, ''),
        port: call.shard.url.port,
        method: call.method,
        path: call.pathAndQuery,
        headers,
        agent: stream ? false : call.pool.agentFor(call.shard),
        signal: call.signal,
      },
      (res) => {
        clearTimeout(timer)
        resolve(res)
      },
    )
    let timer: NodeJS.Timeout | undefined
    req.on('socket', (socket) => {
      if (!socket.connecting) return
      timer = setTimeout(
        () => req.destroy(new Error(`no connection within ${call.connectTimeoutMs} ms`)),
        call.connectTimeoutMs,
      )
      socket.once('connect', () => clearTimeout(timer))
    })
    let clientGone = false
    req.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      if (!stream && req.reusedSocket && error.code === 'ECONNRESET') reject(new StaleConnection())
      else if (call.signal?.aborted || clientGone)
        reject(new RouterError('CONNECTION_LOST', 'the client went away before the runner answered'))
      else reject(unavailable(call.shard, error.code ?? error.message, error))
    })
    if (!stream) {
      req.end(call.body)
      return
    }
    // The client's upload: ended early means the client went away, so the runner's request
    // goes too. Once the runner's request is over, whatever the client still sends is dropped
    // so that its connection is not left holding an unread body.
    stream.once('close', () => {
      if (stream.readableEnded) return
      clientGone = true
      req.destroy(new Error('the client went away during the upload'))
    })
    req.once('close', () => {
      call.onStreamClosed?.()
      stream.unpipe(req)
      if (!stream.readableEnded && !stream.destroyed) stream.resume()
    })
    stream.pipe(req)
  })
}

/** The runner's response headers that go back to the client: all but the hop-by-hop ones. */
export function returnableHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out = forwardableHeaders(headers)
  if (headers['content-length'] !== undefined) out['content-length'] = headers['content-length']
  return out
}
