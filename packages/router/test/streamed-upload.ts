// Clients for large uploads through the router: one that streams random bytes with
// backpressure and hashes them as it sends, and one that starts an upload on a raw socket and
// leaves it unfinished, for a client that goes away mid-upload.
import { createHash, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { request } from 'node:http'
import type { Socket } from 'node:net'
import { openSocket, type RawResponse } from './raw-http.ts'

/** What an upload sent and what came back. */
export interface UploadResult {
  /** The response, which may arrive before the whole body was sent. */
  response: RawResponse
  /** Bytes written before the response ended. */
  sent: number
  /** SHA-256 (hex) of every byte of the intended body. */
  sha256: string
}

/**
 * POSTs `mebibytes` MiB of random bytes to `path`, with a content-length or (`chunked`)
 * without one. Writing stops early if the response ends first.
 */
export async function upload(
  base: string,
  path: string,
  headers: Record<string, string>,
  mebibytes: number,
  options: { chunked?: boolean } = {},
): Promise<UploadResult> {
  const url = new URL(base)
  const chunk = 1024 * 1024
  const lengthHeader: Record<string, string> = options.chunked
    ? {}
    : { 'content-length': String(mebibytes * chunk) }
  const req = request({
    host: url.hostname,
    port: url.port,
    method: 'POST',
    path,
    headers: { 'content-type': 'application/octet-stream', ...headers, ...lengthHeader },
    agent: false,
  })
  let done = false
  const response = new Promise<RawResponse>((resolve, reject) => {
    req.on('response', (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => {
        text += c
      })
      res.on('end', () => {
        done = true
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
  })
  const hash = createHash('sha256')
  let sent = 0
  for (let i = 0; i < mebibytes && !done; i++) {
    const bytes = randomBytes(chunk)
    hash.update(bytes)
    sent += bytes.length
    if (!req.write(bytes)) await Promise.race([once(req, 'drain'), response])
  }
  req.end()
  return { response: await response, sent, sha256: hash.digest('hex') }
}

/**
 * Sends a POST's head announcing `totalBytes` and the first `sentBytes` of it on a raw socket,
 * and resolves with the socket, the upload still unfinished.
 */
export async function startUpload(
  base: string,
  path: string,
  headers: Record<string, string>,
  totalBytes: number,
  sentBytes: number,
): Promise<Socket> {
  const socket = await openSocket(base)
  socket.on('error', () => {})
  const head = Object.entries({ ...headers, host: new URL(base).host, 'content-length': String(totalBytes) })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')
  socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`)
  socket.write(randomBytes(sentBytes))
  return socket
}
