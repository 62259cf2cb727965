// Raw HTTP and WebSocket clients for attack tests: a path is sent byte for byte (fetch would
// resolve `..`), headers can be oversized, and a shell socket reports how it closed.
import { request } from 'node:http'
import { connect, type Socket } from 'node:net'
import WebSocket from 'ws'

/** A response as received. */
export interface RawResponse {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** Attempts a request whose body the server cut short may take before it counts as failed. */
const CUT_SHORT_ATTEMPTS = 5

/**
 * Sends one request with the path exactly as given, on a connection of its own that it closes
 * once the answer has arrived, asking to keep it alive as fetch does. An answer that arrived
 * before a failed write counts.
 *
 * A server may refuse a body it has not read and close the connection (fastify does, with
 * 413, so that the client stops sending). The client's next write then fails with EPIPE or
 * ECONNRESET, and Node destroys the socket, sometimes before reading the answer that is already
 * waiting on it. Such a request is sent again, up to CUT_SHORT_ATTEMPTS times: a server that
 * never answers still fails the caller, and every attempt is the same request, so a test that
 * asserts nothing reached an upstream still sees each one.
 */
export async function rawRequest(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: Buffer | string,
): Promise<RawResponse> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await rawRequestOnce(base, method, path, headers, body)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      const cutShort = body !== undefined && (code === 'EPIPE' || code === 'ECONNRESET')
      if (!cutShort || attempt === CUT_SHORT_ATTEMPTS) throw error
    }
  }
}

function rawRequestOnce(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer | string | undefined,
): Promise<RawResponse> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    let answer: RawResponse | null = null
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: { connection: 'keep-alive', ...headers },
        agent: false,
      },
      (res) => {
        const received: RawResponse = { status: res.statusCode ?? 0, headers: res.headers, body: '' }
        answer = received
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          received.body += c
        })
        res.on('end', () => {
          resolve(received)
          req.destroy()
        })
        res.on('error', reject)
      },
    )
    req.on('error', (error) => {
      if (answer === null) reject(error)
      else resolve(answer)
    })
    req.end(body)
  })
}

/** The parsed error code of a response body, or null. */
export function codeOf(response: RawResponse): string | null {
  try {
    return (JSON.parse(response.body) as { error?: { code?: string } }).error?.code ?? null
  } catch {
    return null
  }
}

/** Opens a TCP connection and resolves once it is connected. */
export function openSocket(base: string): Promise<Socket> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => resolve(socket))
    socket.once('error', reject)
  })
}

/** How a shell socket attempt ended. */
export type ShellOutcome =
  | {
      kind: 'open'
      ws: WebSocket
      frames: Record<string, unknown>[]
      closed: Promise<{ code: number; reason: string }>
    }
  | { kind: 'refused'; status: number; body: string }

/** Opens `/v1/sandboxes/:id/shell` with a bearer secret (header, or subprotocol as browsers do). */
export function openShell(
  base: string,
  sandboxId: string,
  secret: string,
  options: { query?: string; viaSubprotocol?: boolean } = {},
): Promise<ShellOutcome> {
  const url = `${base.replace(/^http/, 'ws')}/v1/sandboxes/${sandboxId}/shell${options.query ? `?${options.query}` : ''}`
  const ws = options.viaSubprotocol
    ? new WebSocket(url, ['conch.v1', `bearer.${secret}`])
    : new WebSocket(url, ['conch.v1'], { headers: { authorization: `Bearer ${secret}` } })
  const frames: Record<string, unknown>[] = []
  ws.on('message', (data) => frames.push(JSON.parse(data.toString()) as Record<string, unknown>))
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  )
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ kind: 'open', ws, frames, closed }))
    ws.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (c: Buffer) => {
        body += c.toString()
      })
      res.on('end', () => resolve({ kind: 'refused', status: res.statusCode ?? 0, body }))
    })
    ws.once('error', reject)
  })
}

/** Resolves with the first frame (seen or future) that matches. */
export async function nextFrame(
  outcome: Extract<ShellOutcome, { kind: 'open' }>,
  match: (frame: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  for (;;) {
    const seen = outcome.frames.find(match)
    if (seen) return seen
    await new Promise<void>((resolve, reject) => {
      outcome.ws.once('message', () => resolve())
      void outcome.closed.then(({ code }) => reject(new Error(`socket closed (${code}) before the frame`)))
    })
  }
}

/** Sends a WebSocket upgrade by hand, reads the 101, then stops reading for good. */
export async function upgradeThenStopReading(
  base: string,
  path: string,
  headers: Record<string, string>,
): Promise<Socket> {
  const url = new URL(base)
  const socket = await openSocket(base)
  const lines = [
    `GET ${path} HTTP/1.1`,
    `host: ${url.host}`,
    'connection: Upgrade',
    'upgrade: websocket',
    'sec-websocket-version: 13',
    'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ]
  return new Promise((resolve, reject) => {
    let head = ''
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.removeAllListeners('data')
      socket.pause()
      if (head.startsWith('HTTP/1.1 101')) resolve(socket)
      else reject(new Error(`upgrade refused: ${head.split('\r\n')[0]}`))
    })
    socket.write(`${lines.join('\r\n')}\r\n\r\n`)
  })
}
