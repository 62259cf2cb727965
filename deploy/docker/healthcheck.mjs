// The image's HEALTHCHECK: exits 0 when the runner in this container answers GET /healthz.
// It asks on loopback unless the runner listens on one specific address.
const port = process.env.CONCH_PORT ?? '7878'
const listen = process.env.CONCH_HOST ?? '127.0.0.1'
const host = ['0.0.0.0', '::', ''].includes(listen) ? '127.0.0.1' : listen
const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}/healthz`
try {
  const response = await fetch(url, { signal: AbortSignal.timeout(4000) })
  process.exit(response.ok ? 0 : 1)
} catch {
  process.exit(1)
}
