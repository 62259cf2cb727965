// TLS termination for egress to a host that gets injected credentials.
//
// Model: the proxy has admitted a CONNECT to `host:port` and found credentials for it. Instead of
// a byte tunnel, it answers 200 and speaks TLS to the sandbox itself, with a leaf certificate for
// `host` signed by the sandbox's own CA (egress-ca.ts; the sandbox trusts it, no one else does).
// The decrypted requests are parsed by an HTTP server that never listens, and each is relayed
// with the credentials to the real host over a new, verified TLS connection
// (egress-injection.ts). Only HTTP/1.1 is offered (ALPN), and an Upgrade (WebSocket) through a
// terminated tunnel is refused: the credential would go out, and the frames after it could not be
// screened for its reflection. Pipelined requests are relayed one at a time (requests-in-turn.ts).

import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { Agent as HttpsAgent } from 'node:https'
import type { Duplex } from 'node:stream'
import { type SecureContext, TLSSocket } from 'node:tls'
import type { EgressCa } from './egress-ca.ts'
import type { InjectedCredentials } from './egress-credentials.ts'
import { relayWithCredentials } from './egress-injection.ts'
import { createServer } from './node-http.ts'
import { inTurn } from './requests-in-turn.ts'

/** One terminated tunnel. */
export interface TerminatedTunnel {
  /** The sandbox (logged). */
  sandboxId: string
  /** The admitted host name. */
  host: string
  /** Port. */
  port: number
  /** The screened address. */
  address: string
  /** The sandbox's CA. */
  ca: EgressCa
  /** What to inject. */
  credentials: InjectedCredentials
}

/** What the terminator needs. */
export interface EgressTlsTerminatorOptions {
  /** Trust for upstream TLS when not Node's default roots. */
  secureContext?: SecureContext | undefined
  /** Bytes relayed, per sandbox. */
  onBytes?: ((sandboxId: string, direction: 'out' | 'in', bytes: number) => void) | undefined
  /** Logs one line per request (credential names, never values). */
  log: (fields: Record<string, unknown>, message: string) => void
}

/** Terminates TLS tunnels and relays their requests with credentials. */
export class EgressTlsTerminator {
  readonly #o: EgressTlsTerminatorOptions
  readonly #server: Server
  readonly #tunnels = new WeakMap<object, TerminatedTunnel>()
  // No cap per host: a cap shared by every sandbox would let one sandbox's open requests queue
  // another's; each sandbox's connections are bounded by its own cap (sandbox-network-limits.ts).
  readonly #agent = new HttpsAgent({ keepAlive: true, maxFreeSockets: 8 })

  /** A terminator with `options`. */
  constructor(options: EgressTlsTerminatorOptions) {
    this.#o = options
    this.#server = createServer({ maxHeaderSize: 16 * 1024 }, (req, res) =>
      inTurn(req, res, () => this.#onRequest(req, res)),
    )
    this.#server.on('upgrade', (_req: IncomingMessage, socket: Duplex) =>
      socket.end(
        'HTTP/1.1 501 Not Implemented\r\ncontent-type: text/plain\r\nconnection: close\r\ncontent-length: 73\r\n\r\nupgrades are not relayed to a host with injected credentials (HTTP only)\n',
      ),
    )
    this.#server.on('clientError', (_error, socket: Duplex) => socket.destroy())
  }

  /** Answers the CONNECT with 200 and serves TLS on `client` as `tunnel.host`. */
  async terminate(client: Duplex, head: Buffer, tunnel: TerminatedTunnel): Promise<void> {
    const leaf = await tunnel.ca.leaf(tunnel.host)
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    if (head.byteLength > 0) client.unshift(head)
    const tls = new TLSSocket(client as unknown as import('node:net').Socket, {
      isServer: true,
      cert: leaf.cert,
      key: leaf.key,
      ALPNProtocols: ['http/1.1'],
    })
    tls.on('error', () => tls.destroy())
    client.on('close', () => tls.destroy())
    this.#tunnels.set(tls, tunnel)
    this.#server.emit('connection', tls)
  }

  /** Closes idle upstream connections (runner shutdown). */
  close(): void {
    this.#agent.destroy()
  }

  #onRequest(req: IncomingMessage, res: ServerResponse): void {
    const tunnel = this.#tunnels.get(req.socket)
    const refuse = (status: number, message: string): void => {
      this.#o.log(
        { sandboxId: tunnel?.sandboxId, host: tunnel?.host, allowed: false, reason: message },
        'egress refused',
      )
      if (res.headersSent) {
        res.destroy()
        return
      }
      res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' })
      res.end(`${message}\n`)
    }
    if (!tunnel) {
      res.destroy()
      return
    }
    const path = req.url ?? ''
    if (!path.startsWith('/')) {
      refuse(400, `inside a tunnel to ${tunnel.host}, send origin-form paths (/…)`)
      return
    }
    this.#o.log(
      {
        sandboxId: tunnel.sandboxId,
        host: tunnel.host,
        port: tunnel.port,
        address: tunnel.address,
        credentials: tunnel.credentials.names,
        allowed: true,
      },
      'egress request with credentials',
    )
    relayWithCredentials(
      req,
      res,
      {
        secure: true,
        host: tunnel.host,
        port: tunnel.port,
        address: tunnel.address,
        path,
        credentials: tunnel.credentials,
        secureContext: this.#o.secureContext,
        agent: this.#agent,
      },
      refuse,
      (direction, bytes) => this.#o.onBytes?.(tunnel.sandboxId, direction, bytes),
    )
  }
}
