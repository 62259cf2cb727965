// A tiny static file server for the built site: `/a/b/` serves `dist/a/b/index.html`, unknown
// paths get `404.html` with status 404. Only for the browser test.
import { createReadStream, existsSync, statSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { extname, join, normalize, sep } from 'node:path'

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.xml': 'application/xml',
  '.wasm': 'application/wasm',
}

/** A running static server; disposing it closes it. */
export interface StaticServer extends AsyncDisposable {
  /** `http://127.0.0.1:<port>` */
  origin: string
}

function resolveFile(root: string, pathname: string): string | null {
  const decoded = decodeURIComponent(pathname)
  const file = normalize(join(root, decoded))
  if (file !== root && !file.startsWith(root + sep)) return null
  if (existsSync(file) && statSync(file).isFile()) return file
  const index = join(file, 'index.html')
  if (existsSync(index)) return index
  return null
}

/** Serves `root` on 127.0.0.1 on a free port. */
export async function serveStatic(root: string): Promise<StaticServer> {
  const server: Server = createServer((req, res) => {
    const { pathname } = new URL(req.url ?? '/', 'http://localhost')
    const file = resolveFile(root, pathname)
    const status = file ? 200 : 404
    const body = file ?? join(root, '404.html')
    res.writeHead(status, { 'content-type': TYPES[extname(body)] ?? 'application/octet-stream' })
    createReadStream(body).pipe(res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
