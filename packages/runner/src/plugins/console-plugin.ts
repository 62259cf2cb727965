// The web console under /console/: one static page (console-page.ts) and xterm.js's files,
// read from the runner's own dependencies, so it works with no internet. The page and its
// assets are public (they hold no secret); everything they do goes through the API with a
// sandbox token from the page's URL fragment.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { FastifyInstance } from 'fastify'
import { CONSOLE_HTML } from '../console/console-page.ts'

/** The console's assets: URL name → package file and content type. */
const ASSETS: Record<string, { module: string; type: string }> = {
  'xterm.js': { module: '@xterm/xterm/lib/xterm.js', type: 'text/javascript; charset=utf-8' },
  'xterm.css': { module: '@xterm/xterm/css/xterm.css', type: 'text/css; charset=utf-8' },
  'addon-fit.js': { module: '@xterm/addon-fit/lib/addon-fit.js', type: 'text/javascript; charset=utf-8' },
}

/** Headers every console response carries: no framing by other sites, nothing loaded from elsewhere. */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; connect-src 'self' ws: wss:; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
}

/** Serves the web console. */
export async function consolePlugin(app: FastifyInstance): Promise<void> {
  const require = createRequire(import.meta.url)
  const cache = new Map<string, Buffer>()
  app.get('/console', { config: { access: 'public' } }, async (_request, reply) =>
    reply.redirect('/console/'),
  )
  app.get('/console/', { config: { access: 'public' } }, async (_request, reply) =>
    reply.headers(SECURITY_HEADERS).type('text/html; charset=utf-8').send(CONSOLE_HTML),
  )
  app.get('/console/:asset', { config: { access: 'public' } }, async (request, reply) => {
    const { asset } = request.params as { asset: string }
    const entry = Object.hasOwn(ASSETS, asset) ? ASSETS[asset] : undefined
    if (!entry)
      return reply.code(404).send({ error: { code: 'NOT_FOUND', message: `no console asset ${asset}` } })
    let bytes = cache.get(asset)
    if (!bytes) {
      bytes = readFileSync(require.resolve(entry.module))
      cache.set(asset, bytes)
    }
    return reply.headers(SECURITY_HEADERS).type(entry.type).send(bytes)
  })
}
