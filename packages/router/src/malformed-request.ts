// Answers to a request that never reaches a route: HTTP that Node's parser rejects (answered on
// the socket itself, since no response object exists yet) and a URL fastify cannot decode. Both
// carry the same typed error body as any other refusal; a request that timed out gets a bare 408.
import type { Duplex } from 'node:stream'
import type { FastifyReply } from 'fastify'
import { RouterError } from './router-error.ts'
import type { RouterMetrics } from './router-metrics.ts'

/** Answers HTTP the parser rejected (too-large headers, not HTTP/1.1, a timeout) and closes. */
export function answerMalformedRequest(
  error: NodeJS.ErrnoException,
  socket: Duplex,
  maxHeaderBytes: number,
): void {
  if (!socket.writable) {
    socket.destroy()
    return
  }
  const header = error.code === 'HPE_HEADER_OVERFLOW'
  const e = header
    ? new RouterError(
        'FRAME_TOO_LARGE',
        `the request headers are larger than ${maxHeaderBytes} bytes; send smaller headers`,
      )
    : new RouterError('BAD_REQUEST', 'the request is not valid HTTP/1.1')
  const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
  const body = JSON.stringify(e.toBody())
  socket.end(
    timedOut
      ? 'HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'
      : `HTTP/1.1 ${e.status} Error\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  )
}

/** Answers a URL fastify cannot decode with BAD_REQUEST, counted like any other error. */
export function answerUndecodableUrl(reply: FastifyReply, metrics: RouterMetrics): void {
  metrics.errors.inc({ code: 'BAD_REQUEST' })
  const body = JSON.stringify(
    new RouterError('BAD_REQUEST', 'the request URL is not valid percent-encoded text').toBody(),
  )
  reply.raw.writeHead(400, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  })
  reply.raw.end(body)
}
