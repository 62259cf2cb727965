// What a sandbox server's `Set-Cookie` may do once relayed: set cookies for its own port only.
//
// A browser takes a cookie's scope from its attributes, not from who sent it. Relayed as they
// came, a sandbox server's cookies could reach past its port: `Domain=` widens a cookie to every
// host under a parent (every other sandbox's preview host, and the operator's own sites next to
// the runner), and on the path form, where every sandbox shares the runner's origin, `Path=/` or
// `Path=/v1/sandboxes/<other>/ports/…` plants a cookie that the browser sends with requests to
// another sandbox's port (a session fixed by sandbox A in sandbox B's app). So `Domain` is
// dropped (the cookie stays on the host that served it), and on the path form a `Path` outside
// the port's prefix is moved under it (`Path=/app` becomes `Path=<prefix>/app`), as a reverse
// proxy that mounts an app under a prefix does. The runner's own cookie is never set, in any
// spelling a browser reads as that name.
import { PORT_TOKEN_COOKIE } from '@conch/protocol'

/** The cookie's name as a browser reads it (a pair with an empty name is read by its value). */
function cookieName(pair: string): string {
  const trimmed = pair.trim().replace(/^=\s*/, '')
  return (trimmed.split('=')[0] ?? '').trim()
}

/**
 * The `Set-Cookie` values a sandbox server sent, scoped to its port: `prefix` is the path form's
 * `/v1/sandboxes/:id/ports/:port`, or '' on a preview host (an origin of its own).
 */
export function relayedSetCookie(values: readonly string[], prefix: string): string[] {
  const out: string[] = []
  for (const value of values) {
    const [pair = '', ...attributes] = value.split(';')
    if (cookieName(pair).toLowerCase() === PORT_TOKEN_COOKIE) continue
    let path: string | null = null
    const kept: string[] = []
    for (const attribute of attributes) {
      const name = (attribute.split('=')[0] ?? '').trim().toLowerCase()
      if (name === 'domain') continue
      if (name === 'path') {
        path = attribute.slice(attribute.indexOf('=') + 1).trim()
        continue
      }
      kept.push(attribute.trim())
    }
    if (prefix !== '') {
      const inside = path !== null && (path === prefix || path.startsWith(`${prefix}/`))
      path = inside ? path : `${prefix}${path?.startsWith('/') ? path : '/'}`
    }
    out.push([pair.trim(), ...(path === null ? [] : [`Path=${path}`]), ...kept].join('; '))
  }
  return out
}
