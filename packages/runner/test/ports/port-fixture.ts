// Test fixture: servers started inside a sandbox (as background processes of its own agent),
// and helpers to reach them through the runner's port relay.
import { createHash } from 'node:crypto'
import { AccessToken, ExposedPort } from '@conch/protocol'
import { vi } from 'vitest'
import { baseUrl, type TestRunner } from '../runner-fixture.ts'

/**
 * A Node HTTP server for the relay tests. It listens on 127.0.0.1 (port 0 unless PORT is set),
 * writes its port to `<name>.port`, and answers: `/echo…` with what it received, `POST
 * /upload` with the body's size and SHA-256, `/sse` with three server-sent events, `/sse-forever` with one every 20 ms until closed, `/big?mb=N`
 * with N MiB, `/stall` by never reading or answering, `/cookies?c=<JSON array>` with those
 * Set-Cookie values, `/headers?h=<JSON object>` with those response headers; an Upgrade is answered 101 and then
 * echoes bytes. A second listener (`<name>.headers-port`) sends an endless response head.
 */
export const PORT_SERVER = `
const http = require('node:http')
const net = require('node:net')
const fs = require('node:fs')
const crypto = require('node:crypto')
const name = process.argv[2]
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x')
  if (url.pathname === '/upload') {
    const hash = crypto.createHash('sha256')
    let bytes = 0
    req.on('data', (c) => { bytes += c.length; hash.update(c) })
    req.on('end', () => res.end(JSON.stringify({ bytes, sha256: hash.digest('hex') })))
    return
  }
  if (url.pathname === '/sse') {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    let n = 0
    const timer = setInterval(() => {
      n += 1
      res.write('data: tick ' + n + '\\n\\n')
      if (n === 3) { clearInterval(timer); res.end() }
    }, 10)
    return
  }
  if (url.pathname === '/big') {
    const mb = Number(url.searchParams.get('mb') || '1')
    const chunk = Buffer.alloc(1024 * 1024, 97)
    let sent = 0
    const more = () => {
      while (sent < mb) { sent += 1; if (!res.write(chunk)) return res.once('drain', more) }
      res.end()
    }
    return more()
  }
  if (url.pathname === '/stall') return
  if (url.pathname === '/sse-forever') {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    const timer = setInterval(() => res.write('data: tick\\n\\n'), 20)
    res.on('close', () => clearInterval(timer))
    return
  }
  if (url.pathname === '/headers') {
    res.writeHead(200, JSON.parse(url.searchParams.get('h') || '{}'))
    return res.end('headers')
  }
  if (url.pathname === '/cookies') {
    res.setHeader('set-cookie', JSON.parse(url.searchParams.get('c') || '[]'))
    return res.end()
  }
  if (url.pathname === '/close-after') {
    res.on('finish', () => req.socket.end())
    return res.end('closing')
  }
  let body = 0
  req.on('data', (c) => { body += c.length })
  req.on('end', () => {
    res.setHeader('content-type', 'application/json')
    res.setHeader('set-cookie', ['app=1; Path=/', 'conch_port_token=planted; Path=/'])
    res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body, remotePort: req.socket.remotePort }))
  })
})
server.on('upgrade', (req, socket, head) => {
  if (String(req.headers.upgrade).toLowerCase() === 'websocket') return webSocketEcho(req, socket, head)
  socket.write('HTTP/1.1 101 Switching Protocols\\r\\nupgrade: ' + req.headers.upgrade + '\\r\\nconnection: Upgrade\\r\\n\\r\\n')
  if (head.length) socket.write(head)
  socket.pipe(socket)
})
// A WebSocket echo (RFC 6455, unfragmented frames under 64 KiB): text and binary come back as sent.
function webSocketEcho(req, socket, head) {
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
  socket.write('HTTP/1.1 101 Switching Protocols\\r\\nupgrade: websocket\\r\\nconnection: Upgrade\\r\\nsec-websocket-accept: ' + accept + '\\r\\n\\r\\n')
  let buffer = head
  const onData = (chunk) => {
    buffer = Buffer.concat([buffer, chunk])
    for (;;) {
      if (buffer.length < 2) return
      const opcode = buffer[0] & 0x0f
      let length = buffer[1] & 0x7f
      let at = 2
      if (length === 126) { if (buffer.length < 4) return; length = buffer.readUInt16BE(2); at = 4 }
      if (buffer.length < at + 4 + length) return
      const mask = buffer.subarray(at, at + 4)
      const payload = Buffer.from(buffer.subarray(at + 4, at + 4 + length))
      for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4]
      buffer = buffer.subarray(at + 4 + length)
      if (opcode === 8) return socket.end(Buffer.from([0x88, 0]))
      const header = payload.length < 126 ? Buffer.from([0x80 | opcode, payload.length]) : Buffer.from([0x80 | opcode, 126, payload.length >> 8, payload.length & 0xff])
      socket.write(Buffer.concat([header, payload]))
    }
  }
  socket.on('data', onData)
  if (head.length) { buffer = Buffer.alloc(0); onData(head) }
}
const endless = net.createServer((socket) => {
  socket.on('error', () => {})
  socket.write('HTTP/1.1 200 OK\\r\\n')
  const line = Buffer.from('x-endless: ' + 'a'.repeat(1000) + '\\r\\n')
  const more = () => { while (!socket.destroyed && socket.write(line)) {} if (!socket.destroyed) socket.once('drain', more) }
  more()
})
server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  endless.listen(0, '127.0.0.1', () => {
    fs.writeFileSync(name + '.headers-port', String(endless.address().port))
    fs.writeFileSync(name + '.port.tmp', String(server.address().port))
    fs.renameSync(name + '.port.tmp', name + '.port')
  })
})
`

/** Where a started server listens inside the sandbox. */
export interface SandboxServer {
  /** The HTTP server's port. */
  port: number
  /** The endless-headers server's port. */
  headersPort: number
}

/** Starts `PORT_SERVER` in sandbox `id` as a background process and waits for its ports. */
export async function startSandboxServer(
  runner: TestRunner,
  id: string,
  name = 'srv',
): Promise<SandboxServer> {
  const base = `${baseUrl(runner.app)}/v1/sandboxes/${id}`
  const put = await fetch(`${base}/files?path=/workspace/${name}.js`, {
    method: 'PUT',
    headers: runner.auth,
    body: PORT_SERVER,
  })
  if (put.status !== 200) throw new Error(`write server: ${put.status} ${await put.text()}`)
  const start = await fetch(`${base}/processes`, {
    method: 'POST',
    headers: { ...runner.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ command: `exec node ${name}.js ${name}` }),
  })
  if (start.status !== 200) throw new Error(`start server: ${start.status} ${await start.text()}`)
  const read = async (file: string): Promise<number> => {
    const res = await fetch(`${base}/files?path=/workspace/${file}`, { headers: runner.auth })
    if (res.status !== 200) throw new Error(`${file} not written yet`)
    return Number(await res.text())
  }
  const port = await vi.waitFor(() => read(`${name}.port`), { timeout: 20_000, interval: 50 })
  const headersPort = await read(`${name}.headers-port`)
  return { port, headersPort }
}

/** The relay URL of `path` on `port` of sandbox `id`. */
export function portUrl(runner: TestRunner, id: string, port: number | string, path = '/'): string {
  return `${baseUrl(runner.app)}/v1/sandboxes/${id}/ports/${port}${path}`
}

/** SHA-256 of bytes, hex. */
export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** Exposes `port` of sandbox `id` with the API key; throws unless 200. */
export async function expose(
  runner: TestRunner,
  id: string,
  port: number,
  body: object = {},
): Promise<ExposedPort> {
  const res = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exposed-ports/${port}`, {
    method: 'POST',
    headers: { ...runner.auth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (res.status !== 200) throw new Error(`expose: ${res.status} ${await res.text()}`)
  return ExposedPort.parse(await res.json())
}

/** Mints a sandbox token for `id` with the API key. */
export async function sandboxToken(runner: TestRunner, id: string): Promise<string> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/tokens`,
    headers: runner.auth,
    payload: {},
  })
  return AccessToken.parse(res.json()).token
}

/** The error code of an error answer. */
export async function errorCode(res: Response): Promise<string> {
  return ((await res.json()) as { error: { code: string } }).error.code
}
