// A client of the egress proxy as a sandbox program would be: CONNECT, then TLS with the trust
// it was given, then one HTTP request; or a plain-HTTP proxy request.
import { type IncomingHttpHeaders, request } from 'node:http'
import { connect, type Socket } from 'node:net'
import { type TLSSocket, connect as tlsConnect } from 'node:tls'

/** An answer through the proxy. */
export interface ProxyAnswer {
  /** HTTP status (of the CONNECT when it was refused). */
  status: number
  /** Body as text. */
  body: string
  /** Response headers. */
  headers: IncomingHttpHeaders
  /** Issuer CN of the certificate the client was shown, for tunnels. */
  issuer?: string
}

/** Opens a CONNECT tunnel; resolves with the socket, or the refusal's status and body. */
export function openTunnel(
  proxyPort: number,
  authority: string,
): Promise<{ socket: Socket } | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(proxyPort, '127.0.0.1')
    let received = Buffer.alloc(0)
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk])
      const end = received.indexOf('\r\n\r\n')
      if (end < 0) return
      const head = received.subarray(0, end).toString()
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1] ?? 0)
      if (status === 200) {
        socket.off('data', onData)
        const rest = received.subarray(end + 4)
        if (rest.length > 0) socket.unshift(rest)
        resolve({ socket })
        return
      }
      socket.on('end', () => resolve({ status, body: received.subarray(end + 4).toString() }))
    }
    socket.on('data', onData)
    socket.on('error', reject)
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\n`)
  })
}

/** CONNECT, TLS trusting `ca` for `servername`, then `GET path` with `headers`. */
export async function httpsViaProxy(
  proxyPort: number,
  authority: string,
  options: { ca: string | string[]; path?: string; headers?: Record<string, string>; method?: string },
): Promise<ProxyAnswer> {
  const tunnel = await openTunnel(proxyPort, authority)
  if (!('socket' in tunnel)) return { status: tunnel.status, body: tunnel.body, headers: {} }
  const servername = authority.replace(/:\d+$/, '')
  const tls: TLSSocket = await new Promise((resolve, reject) => {
    const s = tlsConnect({ socket: tunnel.socket, servername, ca: options.ca }, () => resolve(s))
    s.once('error', reject)
  })
  const cn = tls.getPeerCertificate().issuer?.CN
  const issuer = Array.isArray(cn) ? cn[0] : cn
  return new Promise((resolve, reject) => {
    const req = request(
      {
        createConnection: () => tls as unknown as Socket,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers: { host: servername, connection: 'close', ...options.headers },
      },
      (res) => {
        let body = ''
        res.on('data', (c) => {
          body += c
        })
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body, headers: res.headers, ...(issuer ? { issuer } : {}) }),
        )
      },
    )
    req.on('error', reject)
    req.end()
  })
}

/** A plain-HTTP proxy request for `url`. */
export function httpViaProxy(
  proxyPort: number,
  url: string,
  headers: Record<string, string> = {},
): Promise<ProxyAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: proxyPort, path: url, headers }, (res) => {
      let body = ''
      res.on('data', (c) => {
        body += c
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }))
    })
    req.on('error', reject)
    req.end()
  })
}
