// One HTTP exchange with injected credentials: the sandbox's request goes to the host the
// allowlist admitted, at the address the runner screened, with the operator's headers added, and
// the answer comes back with every injected secret redacted.
//
// Over TLS (`secure`) the upstream connection is verified against the real CAs (Node's, or the
// operator's `--egress-upstream-ca`) for the host's name; if the certificate does not verify, the
// handshake fails before any request byte, so no credential is ever sent to an impostor. The Host
// header is the admitted host's, so a request cannot steer the credential to another virtual host
// on the same address.
import type { Agent as HttpAgent, IncomingMessage, ServerResponse } from 'node:http'
import { type Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import { pipeline } from 'node:stream'
import type { SecureContext } from 'node:tls'
import type { InjectedCredentials } from './egress-credentials.ts'
import { Redactor, redactText, secretsOf } from './egress-redactor.ts'
import { HOP_BY_HOP } from './hop-by-hop-headers.ts'
import { request } from './node-http.ts'

/** TLS errors that mean the upstream's certificate did not verify. */
const CERT_ERRORS = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
])

/** Where an injected exchange goes. */
export interface InjectionTarget {
  /** Whether the upstream speaks TLS. */
  secure: boolean
  /** The admitted host name (the Host header and the name the certificate must carry). */
  host: string
  /** Port. */
  port: number
  /** The screened address to connect to. */
  address: string
  /** Path and query, origin-form. */
  path: string
  /** What to add. */
  credentials: InjectedCredentials
  /** Trust for upstream TLS when not Node's default roots (an operator's internal CA added). */
  secureContext?: SecureContext | undefined
  /** Connection pool for the upstream. */
  agent: HttpAgent | HttpsAgent
}

/** The upstream request's headers: the client's, minus hop-by-hop ones, plus the injected ones. */
function requestHeaders(req: IncomingMessage, target: InjectionTarget): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(req.headers))
    if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value
  const defaultPort = target.secure ? 443 : 80
  headers.host = target.port === defaultPort ? target.host : `${target.host}:${target.port}`
  // Compressed bodies cannot be scanned for a reflected secret.
  headers['accept-encoding'] = 'identity'
  for (const [name, value] of Object.entries(target.credentials.headers)) headers[name] = value
  return headers
}

/** Why an upstream failed, in words safe to show the sandbox (never a header value). */
export function upstreamFailure(
  error: NodeJS.ErrnoException,
  host: string,
): { status: number; message: string } {
  const code = error.code ?? ''
  if (CERT_ERRORS.has(code))
    return {
      status: 502,
      message: `the certificate of ${host} did not verify (${code}); the proxy sent nothing to it`,
    }
  return { status: 502, message: `the destination failed: ${code || 'connection error'}` }
}

/**
 * Sends `req` to `target` with the credentials added and relays the answer to `res`, redacted.
 * `onRefuse` answers the client when the exchange fails before a response started.
 */
export function relayWithCredentials(
  req: IncomingMessage,
  res: ServerResponse,
  target: InjectionTarget,
  onRefuse: (status: number, message: string) => void,
  onBytes?: (direction: 'out' | 'in', bytes: number) => void,
): void {
  const secrets = secretsOf(Object.values(target.credentials.headers))
  const options = {
    host: target.address,
    port: target.port,
    method: req.method ?? 'GET',
    path: target.path,
    headers: requestHeaders(req, target),
    setHost: false,
    agent: target.agent,
    maxHeaderSize: 16 * 1024,
  }
  const upstream = target.secure
    ? httpsRequest({
        ...options,
        servername: target.host,
        ...(target.secureContext ? { secureContext: target.secureContext } : {}),
        rejectUnauthorized: true,
      })
    : request(options)
  // A program that hangs up ends the exchange: its answer has nowhere to go (and piping into the
  // closed response would throw outside any handler).
  res.on('close', () => {
    if (!res.writableFinished) upstream.destroy()
  })
  upstream.on('response', (response) => {
    if (res.destroyed) {
      upstream.destroy()
      return
    }
    // A transfer coding besides chunked (`gzip, chunked`) reaches the client as the coded bytes,
    // which the redactor could not read either.
    const codings = [response.headers['content-encoding'], response.headers['transfer-encoding']]
      .flatMap((h) => String(h ?? '').split(','))
      .map((c) => c.trim().toLowerCase())
      .filter((c) => c !== '' && c !== 'identity' && c !== 'chunked')
    const encoding = codings[0] ?? 'identity'
    const bodiless = req.method === 'HEAD' || response.statusCode === 204 || response.statusCode === 304
    if (encoding !== 'identity' && !bodiless) {
      response.destroy()
      onRefuse(
        502,
        `${target.host} answered with a ${encoding.slice(0, 32)}-encoded body although the proxy asked for none; an injected credential's host must send unencoded bodies so the proxy can keep the credential out of them`,
      )
      return
    }
    const out: Record<string, string | string[]> = {}
    for (const [name, value] of Object.entries(response.headers)) {
      if (value === undefined || HOP_BY_HOP.has(name) || name === 'content-length') continue
      out[name] = Array.isArray(value) ? value.map((v) => redactText(v, secrets)) : redactText(value, secrets)
    }
    res.writeHead(response.statusCode ?? 502, out)
    response.on('data', (chunk: Buffer) => onBytes?.('in', chunk.byteLength))
    pipeline(response, new Redactor(secrets), res, () => {})
  })
  upstream.on('error', (error) => {
    if (res.headersSent) res.destroy()
    else {
      const failure = upstreamFailure(error as NodeJS.ErrnoException, target.host)
      onRefuse(failure.status, failure.message)
    }
  })
  req.on('data', (chunk: Buffer) => onBytes?.('out', chunk.byteLength))
  pipeline(req, upstream, () => {})
}
