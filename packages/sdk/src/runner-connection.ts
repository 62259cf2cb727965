import { AuthError, ConchError } from './conch-error.ts'
import { HttpClient } from './http-client.ts'
import { retryPolicy } from './retry-policy.ts'
import type { ConnectOptions } from './sandbox-options.ts'
import type { FetchLike } from './web-socket-like.ts'

/** A runner reached with checked options: its HTTP client, the credential, and the options. */
export interface RunnerConnection {
  /** The runner's HTTP client, with the credential, timeout and retry policy applied. */
  http: HttpClient
  /** The API key or the sandbox token, also sent on WebSocket upgrades. */
  secret: string
  /** The options the connection was made with. */
  options: ConnectOptions
}

/** Rejects a runner URL that fetch could not use, saying how to write it instead. */
function checkRunnerUrl(url: string): void {
  let parsed: URL | null = null
  try {
    parsed = new URL(url)
  } catch {
    // Not absolute: reported below.
  }
  // `localhost:7878` parses, with `localhost:` as its scheme; only http(s) reaches a runner.
  if (parsed?.protocol === 'http:' || parsed?.protocol === 'https:') return
  throw new ConchError(
    'BAD_REQUEST',
    `invalid runner url ${JSON.stringify(url)}: include the scheme, such as http://127.0.0.1:7878 (https:// behind TLS)`,
  )
}

/** Checks the runner URL and credential in `options` and builds the runner's HTTP client. */
export function connectRunner(options: ConnectOptions): RunnerConnection {
  checkRunnerUrl(options.url)
  const secret = options.apiKey ?? options.token
  if (!secret) {
    throw new AuthError(
      'UNAUTHORIZED',
      'no credentials: pass { apiKey } (on a server) or { token } (in a browser)',
    )
  }
  const fetchImpl: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const http = new HttpClient({
    baseUrl: options.url,
    secret,
    fetch: fetchImpl,
    requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    retry: retryPolicy(options.retry),
  })
  return { http, secret, options }
}
