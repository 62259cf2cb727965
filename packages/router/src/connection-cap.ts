// A cap on the router's open client connections, HTTP and WebSocket alike: one over the cap
// gets a single 429 with a RATE_LIMITED body and is closed, before the HTTP parser sees it.
// Slow clients are bounded separately, by the server's header and request timeouts.
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import { ERROR_STATUS } from '@conch/protocol'
import { RouterError } from './router-error.ts'

function refusal(max: number): string {
  const body = JSON.stringify(
    new RouterError('RATE_LIMITED', `the router has ${max} connections open (the limit)`, {
      details: { limit: max, value: max },
    }).toBody(),
  )
  return [
    `HTTP/1.1 ${ERROR_STATUS.RATE_LIMITED} Too Many Requests`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    'connection: close',
    '',
    body,
  ].join('\r\n')
}

/** Enforces `max` open connections on `server`. */
export function capConnections(server: Server, max: number): void {
  let open = 0
  server.prependListener('connection', (socket: Socket) => {
    if (open >= max) {
      socket.end(refusal(max))
      socket.destroySoon()
      return
    }
    open += 1
    socket.once('close', () => {
      open -= 1
    })
  })
}
