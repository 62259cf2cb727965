// Per-port tokens: a credential a browser can carry (in a query on its first visit, then in a
// cookie) that opens one port of one sandbox and nothing else, until it expires.
//
// A token is `cpt_<sandbox id>.<port>.<expiry ms>.<mac>`, where mac is HMAC-SHA256 over the
// other three fields under a key only the runner holds (kept in its state, so tokens outlive a
// restart). Nothing is stored per token: changing any field breaks the mac, and the check names
// the sandbox and port the request is for, so a token for sandbox A or port 3000 opens neither
// sandbox B nor port 3001. The mac also covers the exposure's epoch, a random value the runner
// keeps per exposed port and draws anew when the port is exposed after an unexpose, so a token
// revoked by unexposing never opens the port again. Macs are compared in constant time.
import { createHmac, timingSafeEqual } from 'node:crypto'
import { PORT_TOKEN_PREFIX, PORT_TOKEN_QUERY } from '@conch/protocol'

/** What a valid port token grants. */
export interface PortGrant {
  /** Sandbox id. */
  sandboxId: string
  /** Port. */
  port: number
  /** Expiry, ms since the epoch. */
  expiresAt: number
}

const TOKEN_SHAPE = /^cpt_(sb_[A-Za-z0-9]{8,40})\.([1-9][0-9]{0,4})\.([0-9]{1,15})\.([A-Za-z0-9_-]{43})$/

/** Mints and checks port tokens under one runner key. */
export class PortTokens {
  readonly #key: Buffer

  /** Tokens signed with `key` (the runner's own secret). */
  constructor(key: string) {
    this.#key = Buffer.from(key, 'utf8')
  }

  /** A token for `grant` under the exposure's `epoch`. */
  mint(grant: PortGrant, epoch?: string): string {
    const body = `${grant.sandboxId}.${grant.port}.${grant.expiresAt}`
    return `${PORT_TOKEN_PREFIX}${body}.${this.#mac(body, epoch)}`
  }

  /**
   * Whether `token` opens `port` of `sandboxId` at time `now`: the mac checks out under the
   * exposure's `epoch`, it names this sandbox and port, and it has not expired.
   */
  verify(token: string, sandboxId: string, port: number, now: number, epoch?: string): boolean {
    const match = TOKEN_SHAPE.exec(token)
    if (!match) return false
    const [, id, portText, expiryText, mac] = match
    const body = `${id}.${portText}.${expiryText}`
    const expected = Buffer.from(this.#mac(body, epoch), 'utf8')
    const given = Buffer.from(mac ?? '', 'utf8')
    const authentic = expected.byteLength === given.byteLength && timingSafeEqual(expected, given)
    return authentic && id === sandboxId && Number(portText) === port && Number(expiryText) > now
  }

  /** An exposure recorded before epochs existed has none: its tokens keep their first mac. */
  #mac(body: string, epoch?: string): string {
    const input = epoch === undefined ? `port-token\0${body}` : `port-token\0${body}\0${epoch}`
    return createHmac('sha256', this.#key).update(input).digest('base64url')
  }
}

/**
 * Splits the port token out of a path's query, leaving every other byte of the path as the
 * client sent it (dot segments and escapes are the sandbox server's to interpret).
 */
export function takeQueryToken(path: string): { path: string; token: string | null } {
  const at = path.indexOf('?')
  if (at < 0) return { path, token: null }
  let token: string | null = null
  const kept = path
    .slice(at + 1)
    .split('&')
    .filter((pair) => {
      const [key, ...value] = pair.split('=')
      if (key !== PORT_TOKEN_QUERY) return true
      try {
        token = decodeURIComponent(value.join('='))
      } catch {
        token = 'malformed'
      }
      return false
    })
  return { path: kept.length > 0 ? `${path.slice(0, at)}?${kept.join('&')}` : path.slice(0, at), token }
}
