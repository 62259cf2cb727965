// Loopback stand-ins for hosts that get injected credentials: an HTTPS server whose certificate
// chains to a test CA the runner is told to trust (`upstreamCa`), which records every request
// it gets and answers with the request's headers (a reflector, as an echo endpoint would), and
// an impostor on another port whose certificate chains to a CA nobody trusts.
import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { EgressCa } from '../../src/egress-ca.ts'

/** A started test host. */
export interface TestHost {
  /** Its port on 127.0.0.1. */
  port: number
  /** Headers of every request it received, in order. */
  seen: IncomingHttpHeaders[]
  /** Stops it. */
  close(): void
}

/** How the test host answers. */
export type HostBehaviour = 'reflect' | 'gzip'

function listen(server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  )
}

function handler(seen: IncomingHttpHeaders[], behaviour: HostBehaviour) {
  return (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void => {
    seen.push(req.headers)
    if (behaviour === 'gzip') {
      res.writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'application/octet-stream' })
      res.end(Buffer.from('1f8b', 'hex'))
      return
    }
    req.resume()
    req.on('end', () => {
      const body = JSON.stringify({ url: req.url, headers: req.headers })
      res.writeHead(200, {
        'content-type': 'application/json',
        'x-echo-auth': req.headers.authorization ?? '',
      })
      res.end(body)
    })
  }
}

/** An HTTPS host for `names`, its certificate signed by `ca`. */
export async function httpsHost(
  ca: EgressCa,
  name: string,
  behaviour: HostBehaviour = 'reflect',
): Promise<TestHost> {
  const leaf = await ca.leaf(name)
  const seen: IncomingHttpHeaders[] = []
  const server = createServer({ cert: leaf.cert, key: leaf.key }, handler(seen, behaviour))
  const port = await listen(server)
  return { port, seen, close: () => server.close() }
}

/** A plain HTTP host with the same reflecting handler. */
export async function httpHost(): Promise<TestHost> {
  const seen: IncomingHttpHeaders[] = []
  const server = createHttpServer(handler(seen, 'reflect'))
  const port = await listen(server)
  return { port, seen, close: () => server.close() }
}

/** A CA standing in for a public one (the runner trusts it through `upstreamCa`). */
export function testCa(label: string): Promise<EgressCa> {
  return EgressCa.create(`sb_${label}`)
}
