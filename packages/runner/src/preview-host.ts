// Host-based preview URLs: `<port>-<sandbox id>.<preview domain>` serves one sandbox port on an
// origin of its own, so a page from one sandbox cannot read another's (or the runner's) cookies
// and storage, which the path form `/v1/sandboxes/:id/ports/:port/` cannot promise. Hosts are
// case-insensitive, so the id appears lowercased and is matched against the live sandboxes.
// The runner rewrites such a request onto the path form before routing; nothing else on that
// host (no API route) is reachable.
import type { IncomingMessage } from 'node:http'

const PREVIEW = Symbol('conch-preview')

/** The path-form URL for a request to a preview host, or null when the host is not one. */
export function previewRewrite(
  request: IncomingMessage,
  domain: string | null,
  sandboxIds: () => Iterable<string>,
): string | null {
  if (!domain) return null
  const host = (request.headers.host ?? '').toLowerCase().replace(/:[0-9]+$/, '')
  if (!host.endsWith(`.${domain}`)) return null
  const label = host.slice(0, -domain.length - 1)
  const match = /^([1-9][0-9]{0,4})-(sb_[a-z0-9]{8,40})$/.exec(label)
  if (!match) return '/v1/sandboxes/-/ports/0/'
  let id = '-'
  for (const candidate of sandboxIds()) if (candidate.toLowerCase() === match[2]) id = candidate
  ;(request as unknown as Record<symbol, boolean>)[PREVIEW] = true
  const path = request.url ?? '/'
  return `/v1/sandboxes/${id}/ports/${match[1]}${path.startsWith('/') ? path : `/${path}`}`
}

/** Whether `previewRewrite` rewrote this request. */
export function isPreviewRequest(request: IncomingMessage): boolean {
  return (request as unknown as Record<symbol, boolean>)[PREVIEW] === true
}
