// A real HTTP server that records every request and upgrade it receives and answers 200 with
// an empty sandbox list. Placed in a router's shard table as an extra shard, it shows exactly
// what the router forwards (headers included) and proves what it never forwards. A request whose
// path ends in `/hang-up` is a runner going away mid-upload: its connection is destroyed at the
// first body bytes, with no answer.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'

/** One request as the server saw it. */
export interface Recorded {
  method: string
  url: string
  headers: IncomingHttpHeaders
  upgrade: boolean
}

/** The server and what it saw. */
export interface RecordingServer extends AsyncDisposable {
  readonly url: string
  readonly seen: Recorded[]
}

/** Starts the server on a free loopback port. */
export async function startRecordingServer(): Promise<RecordingServer> {
  const seen: Recorded[] = []
  const server: Server = createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, upgrade: false })
    if (req.url?.endsWith('/hang-up')) {
      req.once('data', () => req.socket.destroy())
      return
    }
    req.resume()
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      res.end('{"sandboxes":[]}')
    })
  })
  server.on('upgrade', (req, socket) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, upgrade: true })
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
