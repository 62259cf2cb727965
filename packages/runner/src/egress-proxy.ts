// The egress proxy: the only way out of a sandbox that has an allowlist.
//
// Model: an HTTP proxy that never listens on a network. Each connection a sandbox program makes
// to its proxy port (127.0.0.1 inside the sandbox) reaches the runner as a relayed stream, tagged
// with its sandbox, and is handed to this server. `CONNECT host:port` (TLS and anything else
// over a tunnel) and absolute-form `GET http://host/…` (plain HTTP) are served; every other
// request is refused. For each, the destination must be on the sandbox's allowlist by the name
// or address the client asked for, the runner resolves the name itself, screens every address
// (`AddressScreen`), and connects to a screened address, so neither a DNS answer nor a Host
// header can steer the connection elsewhere: plain HTTP requests get the Host of the URL they
// named. The proxy does not look inside tunnels; what a TLS client sends as its SNI only picks
// among the services of an address the allowlist admitted, except for a host the sandbox has
// credentials for: that tunnel is terminated and its requests relayed with the credentials added
// (egress-tls-terminator.ts), and a plain-HTTP request to such a host gets them when the operator
// allowed it (egress-injection.ts).
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { connect, isIP, type Socket } from 'node:net'
import { type Duplex, pipeline } from 'node:stream'
import { createSecureContext, rootCertificates } from 'node:tls'
import { redactUrl } from '@conch/protocol'
import type { FastifyBaseLogger } from 'fastify'
import type { EgressAllowlist } from './egress-allowlist.ts'
import { normalizeHost } from './egress-allowlist.ts'
import type { EgressCa } from './egress-ca.ts'
import type { SandboxCredentials } from './egress-credentials.ts'
import { relayWithCredentials } from './egress-injection.ts'
import type { AddressScreen, EgressResolver } from './egress-resolver.ts'
import { EgressTlsTerminator } from './egress-tls-terminator.ts'
import { HOP_BY_HOP } from './hop-by-hop-headers.ts'
import { createServer, Agent as HttpAgent, request } from './node-http.ts'
import { inTurn } from './requests-in-turn.ts'

/** The sandbox a relayed connection came from. */
export interface EgressOrigin {
  /** Sandbox id (logged with every connection). */
  sandboxId: string
  /** Its allowlist. */
  allowlist: EgressAllowlist
  /** The credentials it may use, and the CA that signs the leaves of terminated tunnels. */
  injection?: { credentials: SandboxCredentials; ca: EgressCa } | null
}

/** What the proxy needs, injected. */
export interface EgressProxyOptions {
  /** Name resolution. */
  resolver: EgressResolver
  /** Address screening. */
  screen: AddressScreen
  /** Logger: one line per connection, allowed or refused. */
  logger: FastifyBaseLogger
  /** Called with bytes relayed out and in, per sandbox. */
  onBytes?: (sandboxId: string, direction: 'out' | 'in', bytes: number) => void
  /** CAs trusted for upstream TLS of injected requests besides Node's own (an internal CA). */
  upstreamCa?: readonly string[]
}

class Refused extends Error {
  readonly status: number
  constructor(status: number, message: string) {
    super(message)
    this.status = status
  }
}

/** The egress proxy for every sandbox of a runner. */
export class EgressProxy {
  readonly #options: EgressProxyOptions
  readonly #server: Server
  readonly #origins = new WeakMap<object, EgressOrigin>()
  readonly #terminator: EgressTlsTerminator
  // Uncapped per host for the reason in egress-tls-terminator.ts: a shared cap is one sandbox's to fill.
  readonly #plainAgent = new HttpAgent({ keepAlive: true, maxFreeSockets: 8 })

  /** A proxy with `options`; hand it connections with `accept`. */
  constructor(options: EgressProxyOptions) {
    this.#options = options
    this.#terminator = new EgressTlsTerminator({
      secureContext: options.upstreamCa?.length
        ? createSecureContext({ ca: [...rootCertificates, ...options.upstreamCa] })
        : undefined,
      onBytes: options.onBytes,
      log: (fields, message) => options.logger.info(fields, message),
    })
    // One request of a connection at a time, so one counted connection is one upstream request.
    this.#server = createServer({ maxHeaderSize: 16 * 1024 }, (req, res) =>
      inTurn(req, res, () => void this.#onRequest(req, res)),
    )
    this.#server.on(
      'connect',
      (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.#onConnect(req, socket, head),
    )
    this.#server.on('clientError', (_error, socket: Duplex) => socket.destroy())
  }

  /** Serves one connection from `origin`'s sandbox. */
  accept(stream: Duplex, origin: EgressOrigin): void {
    this.#origins.set(stream, origin)
    this.#server.emit('connection', stream)
  }

  /** Closes idle upstream connections (runner shutdown). */
  close(): void {
    this.#terminator.close()
    this.#plainAgent.destroy()
  }

  /** Where a (host, port) may be reached: a screened address, or a Refused error. */
  async #destination(origin: EgressOrigin, host: string, port: number): Promise<string> {
    const target = normalizeHost(host)
    if (!target) throw new Refused(400, `"${host.slice(0, 100)}" is not a host name or address`)
    if (!origin.allowlist.allows(target.value, port))
      throw new Refused(403, `${target.value}:${port} is not on this sandbox's egress allowlist`)
    let addresses: string[]
    if (target.kind === 'address') addresses = [target.value]
    else {
      try {
        addresses = await this.#options.resolver.resolve(target.value)
      } catch {
        addresses = []
      }
      if (addresses.length === 0) throw new Refused(502, `${target.value} does not resolve`)
    }
    const refusals: string[] = []
    for (const address of addresses) {
      if (!isIP(address)) continue
      const refusal = this.#options.screen.refusal(address, port)
      if (refusal === null) return address
      refusals.push(refusal)
    }
    throw new Refused(403, `${target.value}:${port} is refused: ${refusals[0] ?? 'no usable address'}`)
  }

  #log(origin: EgressOrigin | undefined, fields: Record<string, unknown>, message: string): void {
    this.#options.logger.info({ sandboxId: origin?.sandboxId, ...fields }, message)
  }

  async #onConnect(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    const origin = this.#origins.get(client)
    client.on('error', () => {})
    if (!origin) {
      client.destroy()
      return
    }
    const authority = parseAuthority(req.url ?? '')
    try {
      if (!authority) throw new Refused(400, 'CONNECT needs host:port')
      const address = await this.#destination(origin, authority.host, authority.port)
      const injected = origin.injection?.credentials.forTls(authority.host, authority.port)
      if (injected && origin.injection) {
        await this.#terminator.terminate(client, head, {
          sandboxId: origin.sandboxId,
          host: normalizeHost(authority.host)?.value ?? authority.host,
          port: authority.port,
          address,
          ca: origin.injection.ca,
          credentials: injected,
        })
        return
      }
      const upstream = await dial(address, authority.port)
      this.#log(
        origin,
        { host: authority.host, port: authority.port, address, allowed: true },
        'egress tunnel',
      )
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      if (head.byteLength > 0) upstream.write(head)
      this.#count(origin, upstream, client)
      pipeline(client, upstream, () => upstream.destroy())
      pipeline(upstream, client, () => client.destroy())
    } catch (error) {
      const refused =
        error instanceof Refused ? error : new Refused(502, `cannot connect: ${(error as Error).message}`)
      this.#log(
        origin,
        { target: redactUrl(req.url ?? '').slice(0, 200), allowed: false, reason: refused.message },
        'egress refused',
      )
      client.end(
        `HTTP/1.1 ${refused.status} ${refused.status === 403 ? 'Forbidden' : 'Bad Gateway'}\r\ncontent-type: text/plain\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(refused.message) + 1}\r\n\r\n${refused.message}\n`,
      )
    }
  }

  async #onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const origin = this.#origins.get(req.socket)
    if (!origin) {
      res.destroy()
      return
    }
    const refuse = (refused: Refused): void => {
      this.#log(
        origin,
        { target: redactUrl(req.url ?? '').slice(0, 200), allowed: false, reason: refused.message },
        'egress refused',
      )
      res.writeHead(refused.status, { 'content-type': 'text/plain', connection: 'close' })
      res.end(`${refused.message}\n`)
    }
    let url: URL
    try {
      url = new URL(req.url ?? '')
    } catch {
      refuse(
        new Refused(400, 'this is an HTTP proxy: send absolute http:// URLs, or CONNECT host:port for TLS'),
      )
      return
    }
    if (url.protocol !== 'http:' || url.username || url.password) {
      refuse(new Refused(400, `only plain http:// URLs are proxied (use CONNECT for ${url.protocol}//)`))
      return
    }
    const port = url.port === '' ? 80 : Number(url.port)
    let address: string
    try {
      address = await this.#destination(origin, url.hostname, port)
    } catch (error) {
      refuse(error instanceof Refused ? error : new Refused(502, String(error)))
      return
    }
    const injected = origin.injection?.credentials.forPlainHttp(url.hostname, port)
    if (injected) {
      this.#log(
        origin,
        { host: url.hostname, port, address, credentials: injected.names, allowed: true },
        'egress request with credentials',
      )
      relayWithCredentials(
        req,
        res,
        {
          secure: false,
          host: normalizeHost(url.hostname)?.value ?? url.hostname,
          port,
          address,
          path: `${url.pathname}${url.search}`,
          credentials: injected,
          agent: this.#plainAgent,
        },
        (status, message) => refuse(new Refused(status, message)),
        (direction, bytes) => this.#options.onBytes?.(origin.sandboxId, direction, bytes),
      )
      return
    }
    const headers: Record<string, string | string[]> = {}
    for (const [name, value] of Object.entries(req.headers))
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value
    // The Host is the URL's: a different Host header cannot pick another site on the address.
    headers.host = url.host
    this.#log(origin, { host: url.hostname, port, address, allowed: true }, 'egress request')
    const upstream = request({
      host: address,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
      setHost: false,
      agent: false,
      maxHeaderSize: 16 * 1024,
    })
    // A program that hangs up ends the exchange (piping into its closed response would throw).
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy()
    })
    upstream.on('response', (response) => {
      if (res.destroyed) {
        upstream.destroy()
        return
      }
      const out: Record<string, string | string[]> = {}
      for (const [name, value] of Object.entries(response.headers))
        if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value
      res.writeHead(response.statusCode ?? 502, out)
      response.on('data', (chunk: Buffer) =>
        this.#options.onBytes?.(origin.sandboxId, 'in', chunk.byteLength),
      )
      pipeline(response, res, () => {})
    })
    upstream.on('error', (error) => {
      if (res.headersSent) res.destroy()
      else
        refuse(
          new Refused(
            502,
            `the destination failed: ${(error as NodeJS.ErrnoException).code ?? error.message}`,
          ),
        )
    })
    req.on('data', (chunk: Buffer) => this.#options.onBytes?.(origin.sandboxId, 'out', chunk.byteLength))
    pipeline(req, upstream, () => {})
  }

  #count(origin: EgressOrigin, upstream: Socket, client: Duplex): void {
    const onBytes = this.#options.onBytes
    if (!onBytes) return
    upstream.on('data', (chunk: Buffer) => onBytes(origin.sandboxId, 'in', chunk.byteLength))
    client.on('data', (chunk: Buffer) => onBytes(origin.sandboxId, 'out', chunk.byteLength))
  }
}

/** `host:port` or `[v6]:port` of a CONNECT request. */
export function parseAuthority(authority: string): { host: string; port: number } | null {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):([1-9][0-9]{0,4})$/.exec(authority)
  if (!match) return null
  const port = Number(match[3])
  if (port > 65_535) return null
  return { host: match[1] ?? match[2] ?? '', port }
}

function dial(address: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: address, port, noDelay: true })
    socket.once('connect', () => {
      socket.off('error', reject)
      resolve(socket)
    })
    socket.once('error', reject)
  })
}
