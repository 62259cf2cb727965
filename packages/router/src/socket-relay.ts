// WebSockets through the router: the shell and terminal sockets, a sandbox port's relayed socket
// (`/v1/sandboxes/:id/ports/:port/…`) and one on a preview host. A client's upgrade is held until
// the router has opened the same socket to the runner that holds the sandbox (its host from the
// shard table only), with the client's path, query, subprotocols and headers unchanged (the
// credentials in Authorization, Cookie or the query among them; the Host only on a preview host,
// which the runner routes by), minus hop-by-hop and handshake headers; then the client's upgrade is
// accepted with the subprotocol the runner chose, and messages are relayed both ways as they
// are (text stays text, binary stays binary). A runner that refuses the upgrade has its answer
// passed back to the client; a runner that cannot be reached gets RUNNER_UNAVAILABLE. When
// either side closes, the other is closed with the same code; when the runner's side drops
// without a close (it died), the client gets close code 4503 with reason RUNNER_UNAVAILABLE,
// the runner's convention of 4000 + HTTP status, so the SDK reconnects and reattaches.
// Each direction pauses its source while the other side has too much unsent.
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { ERROR_STATUS } from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import { type RawData, WebSocket, WebSocketServer } from 'ws'
import type { RouterError } from './router-error.ts'
import type { RouterMetrics } from './router-metrics.ts'
import type { SandboxTarget } from './sandbox-target.ts'
import { forwardableHeaders, unavailable } from './upstream-request.ts'

/** Unsent bytes on one side at which the other side stops being read. */
const HIGH_WATER_BYTES = 1024 * 1024
/** Largest body of a refused upgrade passed back to the client. */
const MAX_REFUSAL_BYTES = 64 * 1024
/** Close codes that may be sent in a close frame (RFC 6455 7.4). */
const sendable = (code: number): boolean =>
  (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999)

/** Handshake headers the relay's own client makes for the runner's socket. */
const HANDSHAKE = new Set([
  'sec-websocket-key',
  'sec-websocket-version',
  'sec-websocket-extensions',
  'sec-websocket-protocol',
])

/** The subprotocol the runner accepted, per client upgrade request. */
const chosenProtocol = new WeakMap<IncomingMessage, string>()

/** What the relay needs. */
export interface SocketRelayOptions {
  /** Largest message relayed either way. */
  maxFrameBytes: number
  /** Time to open the runner's socket. */
  connectTimeoutMs: number
  /** Logger. */
  log: FastifyBaseLogger
  /** Metrics. */
  metrics: RouterMetrics
  /** Told when a shard could not be reached. */
  onUnreachable: (shard: string, problem: string) => void
}

/** Writes a plain HTTP error answer on a socket that asked to upgrade, and closes it. */
export function refuseUpgrade(
  socket: Duplex,
  status: number,
  body: string,
  contentType = 'application/json; charset=utf-8',
): void {
  if (socket.destroyed) return
  socket.end(
    [
      `HTTP/1.1 ${status} ${status === 503 ? 'Service Unavailable' : 'Error'}`,
      `content-type: ${contentType}`,
      `content-length: ${Buffer.byteLength(body)}`,
      'connection: close',
      '',
      body,
    ].join('\r\n'),
  )
}

/** Refuses an upgrade with a typed error. */
export function refuseWithError(socket: Duplex, error: RouterError): void {
  refuseUpgrade(socket, ERROR_STATUS[error.code], JSON.stringify(error.toBody()))
}

/** Relays WebSockets between clients and runners. */
export class SocketRelay {
  readonly #o: SocketRelayOptions
  readonly #server: WebSocketServer
  /** Relayed sockets: each client with its runner socket. */
  readonly #open = new Map<WebSocket, WebSocket>()
  /** Upgrades waiting for the runner's answer: each client socket with its runner socket. */
  readonly #pending = new Map<Duplex, WebSocket>()

  /** Creates a relay. */
  constructor(options: SocketRelayOptions) {
    this.#o = options
    this.#server = new WebSocketServer({
      noServer: true,
      // The runner's choice is the only subprotocol a client sees, and it never carries a secret.
      handleProtocols: (_offered, request) => chosenProtocol.get(request) || false,
      maxPayload: options.maxFrameBytes,
      perMessageDeflate: false,
      clientTracking: false,
    })
  }

  /** Handles one client upgrade bound for `target`. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer, target: SandboxTarget): void {
    const protocols = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p.length > 0)
    const headers: Record<string, string | string[]> = {}
    for (const [name, value] of Object.entries(forwardableHeaders(req.headers))) {
      if (!HANDSHAKE.has(name) && value !== undefined)
        headers[name] = Array.isArray(value) ? value : String(value)
    }
    if (target.host !== undefined) headers.host = target.host
    const scheme = target.shard.url.protocol === 'https:' ? 'wss:' : 'ws:'
    const upstreamUrl = `${scheme}//${target.shard.url.host}${target.pathAndQuery}`
    const upstream = new WebSocket(upstreamUrl, protocols, {
      headers,
      handshakeTimeout: this.#o.connectTimeoutMs,
      maxPayload: this.#o.maxFrameBytes,
      perMessageDeflate: false,
      followRedirects: false,
    })
    let settled = false
    this.#pending.set(socket, upstream)
    upstream.once('close', () => this.#pending.delete(socket))
    const clientGone = (): void => {
      this.#pending.delete(socket)
      if (settled) return
      // The client left before the runner answered: not a runner failure.
      settled = true
      upstream.terminate()
    }
    socket.once('close', clientGone)
    upstream.on('unexpected-response', (_r, res) => {
      settled = true
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        if (body.length < MAX_REFUSAL_BYTES) body += chunk
      })
      res.on('end', () => {
        refuseUpgrade(
          socket,
          res.statusCode ?? 502,
          body.slice(0, MAX_REFUSAL_BYTES),
          String(res.headers['content-type'] ?? 'text/plain'),
        )
        upstream.terminate()
      })
      res.on('error', () => socket.destroy())
    })
    upstream.on('error', (error: NodeJS.ErrnoException) => {
      if (settled) return
      settled = true
      const problem = error.code ?? error.message
      this.#o.onUnreachable(target.shard.name, problem)
      refuseWithError(socket, unavailable(target.shard, problem, error))
    })
    upstream.once('open', () => {
      settled = true
      this.#pending.delete(socket)
      socket.off('close', clientGone)
      if (socket.destroyed) {
        upstream.terminate()
        return
      }
      chosenProtocol.set(req, upstream.protocol)
      this.#server.handleUpgrade(req, socket, head, (client) => this.#relay(client, upstream, target))
    })
  }

  /**
   * Closes every socket (the router is stopping): upgrades still waiting for their runner are
   * cut, relayed sockets get a close frame (passed on to their runner sockets), and the pairs
   * that have not both closed within `graceMs` are cut. ws would wait 30 s for a close answer,
   * and the HTTP server's close waits for every socket, so a client that stops reading would
   * hold the router.
   */
  async close(graceMs: number): Promise<void> {
    for (const [socket, upstream] of this.#pending) {
      socket.destroy()
      upstream.terminate()
    }
    this.#pending.clear()
    const open = [...this.#open]
    for (const [client] of open) client.close(1001, 'router shutting down')
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      Promise.all(
        open
          .flat()
          .map((ws) =>
            ws.readyState === WebSocket.CLOSED ? null : new Promise((resolve) => ws.once('close', resolve)),
          ),
      ),
      new Promise((resolve) => {
        timer = setTimeout(resolve, graceMs)
      }),
    ])
    clearTimeout(timer)
    for (const [client, upstream] of open) {
      client.terminate()
      upstream.terminate()
    }
    this.#server.close()
  }

  /** Sockets relayed now. */
  get size(): number {
    return this.#open.size
  }

  #relay(client: WebSocket, upstream: WebSocket, target: SandboxTarget): void {
    this.#open.set(client, upstream)
    this.#o.metrics.shellSockets.inc()
    const pipe = (from: WebSocket, to: WebSocket): void => {
      from.on('message', (data: RawData, isBinary: boolean) => {
        if (to.readyState !== WebSocket.OPEN) return
        to.send(data, { binary: isBinary }, () => {
          if (to.bufferedAmount < HIGH_WATER_BYTES / 2) from.resume()
        })
        if (to.bufferedAmount > HIGH_WATER_BYTES) from.pause()
      })
    }
    pipe(client, upstream)
    pipe(upstream, client)
    let done = false
    const finish = (): void => {
      if (done) return
      done = true
      this.#open.delete(client)
      this.#o.metrics.shellSockets.dec()
    }
    upstream.on('close', (code: number, reason: Buffer) => {
      if (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING) {
        if (sendable(code)) client.close(code, reason)
        else {
          this.#o.log.warn(
            { shard: target.shard.name, sandboxId: target.sandboxId, code },
            'runner socket dropped',
          )
          this.#o.onUnreachable(target.shard.name, `relayed socket dropped (close ${code})`)
          client.close(4000 + ERROR_STATUS.RUNNER_UNAVAILABLE, 'RUNNER_UNAVAILABLE')
        }
      }
      finish()
    })
    client.on('close', (code: number, reason: Buffer) => {
      if (upstream.readyState === WebSocket.OPEN) {
        if (sendable(code)) upstream.close(code, reason)
        else upstream.close(1001, 'client gone')
      }
      finish()
    })
    upstream.on('error', () => {
      // A 'close' follows every error and does the work.
    })
    client.on('error', () => {
      // A 'close' follows every error and does the work.
    })
  }
}
