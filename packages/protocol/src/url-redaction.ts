// Credentials a URL may carry, cut out before the URL is written to a log. A browser's first
// visit to an exposed port carries its port token in the query (`conch_port_token=cpt_…`), and a
// sandbox app's own URLs may carry its users' secrets (`?token=`, `?api_key=`); a log line is
// read by more people than the credential was meant for, so every line that names a request's
// URL goes through `redactUrl` (the runner's request log and the router's).
import { API_KEY_PREFIX, SANDBOX_TOKEN_PREFIX } from './auth.ts'
import { PORT_TOKEN_PREFIX } from './network.ts'

/** What a redacted value is replaced with. */
export const REDACTED = '[redacted]'

/** Query parameter names (lower case, decoded) whose values are credentials. */
const SECRET_PARAM = /token|key|secret|passw|auth|signature|sig$|credential|session|code$/

/** conch's own credentials wherever they appear in a URL (path or query, even misnamed). */
const CONCH_CREDENTIAL = new RegExp(
  `(${API_KEY_PREFIX}|${SANDBOX_TOKEN_PREFIX})[A-Za-z0-9_-]{40,}|${PORT_TOKEN_PREFIX}[A-Za-z0-9._%-]+`,
  'g',
)

function decoded(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/**
 * `url` (a request target: path and query) with the value of every credential-like query
 * parameter and every conch credential replaced by `[redacted]`. The path stays readable.
 */
export function redactUrl(url: string): string {
  const at = url.indexOf('?')
  const path = at < 0 ? url : url.slice(0, at)
  const query =
    at < 0
      ? ''
      : `?${url
          .slice(at + 1)
          .split('&')
          .map((pair) => {
            const eq = pair.indexOf('=')
            if (eq < 0) return pair
            const name = decoded(pair.slice(0, eq)).toLowerCase()
            return SECRET_PARAM.test(name) ? `${pair.slice(0, eq)}=${REDACTED}` : pair
          })
          .join('&')}`
  return `${path}${query}`.replace(CONCH_CREDENTIAL, (match) => {
    for (const prefix of [API_KEY_PREFIX, SANDBOX_TOKEN_PREFIX, PORT_TOKEN_PREFIX])
      if (match.startsWith(prefix)) return `${prefix}${REDACTED}`
    return REDACTED
  })
}
