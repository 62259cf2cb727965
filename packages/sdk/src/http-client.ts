import { check, ShapeError } from '@conch/protocol/json-shape'
import { type ConchError, ConchError as ConchErrorClass, ConnectionError } from './conch-error.ts'
import { deadlineError, deadlineSignal, isTimeoutAbort } from './deadline.ts'
import { errorFromWire } from './error-from-wire.ts'
import { restErrorBody } from './rest-shapes.ts'
import {
  backoffDelayMs,
  DEFAULT_RETRY_POLICY,
  isConnectionRefused,
  isIdempotent,
  isRetryableStatus,
  type RetryPolicy,
  retryAfterMs,
  sleep,
} from './retry-policy.ts'
import type { FetchLike } from './web-socket-like.ts'

/**
 * The checker of an answer (the protocol's `Shape`, spelled here so the SDK's published types
 * name no private package).
 */
type AnswerShape<T> = (value: unknown, path: string) => T

// The REST half of the SDK: one `fetch` per call with the bearer secret, a deadline on every
// call (covering its retries), answers checked against the protocol's shapes, and every failure
// turned into a typed error through `errorFromWire`. Calls the runner refused for now (429, 503)
// or that failed to connect are sent again as `retry-policy.ts` allows.

/** What every REST call needs. */
export interface HttpClientOptions {
  /** Runner base URL, such as `http://127.0.0.1:7070`. */
  baseUrl: string
  /** API key or sandbox-scoped token. */
  secret: string
  /** The fetch to call. */
  fetch: FetchLike
  /** Default deadline per request. */
  requestTimeoutMs: number
  /** When to send a call again; default `DEFAULT_RETRY_POLICY`. */
  retry?: RetryPolicy | undefined
}

/** One request. */
export interface RequestOptions {
  /** Query parameters; `undefined` values are left out. */
  query?: Record<string, string | number | boolean | undefined> | undefined
  /** JSON body. */
  json?: unknown
  /** Raw body. */
  raw?: Uint8Array | string
  /** Deadline for this request instead of the default. */
  timeoutMs?: number | undefined
  /** The caller's signal. */
  signal?: AbortSignal | undefined
  /**
   * Whether the call may be sent twice; default by method (GET, PUT, DELETE yes, POST no).
   * Set on the POSTs the API makes idempotent.
   */
  idempotent?: boolean | undefined
}

/** Makes REST calls to one runner. */
export class HttpClient {
  /** Runner base URL without a trailing slash. */
  readonly baseUrl: string
  /** Default deadline per request. */
  readonly requestTimeoutMs: number
  readonly #secret: string
  readonly #fetch: FetchLike
  readonly #retry: RetryPolicy

  constructor(options: HttpClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '')
    this.#secret = options.secret
    this.#fetch = options.fetch
    this.requestTimeoutMs = options.requestTimeoutMs
    this.#retry = options.retry ?? DEFAULT_RETRY_POLICY
  }

  /** Calls a JSON route and checks the answer against `shape`. */
  async json<T>(
    method: string,
    path: string,
    shape: AnswerShape<T>,
    options: RequestOptions = {},
  ): Promise<T> {
    const response = await this.send(method, path, options, 'application/json')
    const what = `${method} ${path}`
    let value: unknown
    try {
      value = await response.json()
    } catch (err) {
      throw this.#translate(err, what, options)
    }
    try {
      return shape(value, '')
    } catch (err) {
      if (err instanceof ShapeError) {
        throw new ConchErrorClass(
          'INTERNAL',
          `${what} answered with an unexpected body (${err.message}); the runner and @conch/sdk may be incompatible versions`,
          { cause: err },
        )
      }
      throw err
    }
  }

  /** Calls a route that answers with raw bytes. */
  async bytes(method: string, path: string, options: RequestOptions = {}): Promise<Uint8Array> {
    const response = await this.send(method, path, options, 'application/octet-stream')
    try {
      return new Uint8Array(await response.arrayBuffer())
    } catch (err) {
      throw this.#translate(err, `${method} ${path}`, options)
    }
  }

  /**
   * Opens a long-lived response (NDJSON): the deadline covers only the wait for the headers,
   * and the caller's signal ends the body.
   */
  async open(method: string, path: string, options: RequestOptions, accept: string): Promise<Response> {
    const controller = new AbortController()
    const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs
    const timer = setTimeout(
      () => controller.abort(new DOMException('headers timeout', 'TimeoutError')),
      timeoutMs,
    )
    const outer = options.signal
    const onAbort = () => controller.abort(outer?.reason)
    outer?.addEventListener('abort', onAbort, { once: true })
    try {
      return await this.send(
        method,
        path,
        { ...options, signal: controller.signal, timeoutMs: 2_147_483_647 },
        accept,
      )
    } catch (err) {
      if (controller.signal.aborted && !outer?.aborted)
        throw deadlineError(`${method} ${path}`, timeoutMs, err)
      throw err
    } finally {
      clearTimeout(timer)
    }
  }

  /**
   * Sends a request and returns the successful response; failures become typed errors. The
   * deadline covers every try; a retry whose wait would not fit in it is not made, and the
   * last try's error is thrown.
   */
  async send(method: string, path: string, options: RequestOptions, accept: string): Promise<Response> {
    const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs
    const headers: Record<string, string> = { authorization: `Bearer ${this.#secret}`, accept }
    let body: string | Uint8Array | undefined
    if (options.json !== undefined) {
      headers['content-type'] = 'application/json'
      body = JSON.stringify(options.json)
    } else if (options.raw !== undefined) {
      headers['content-type'] = 'application/octet-stream'
      body = options.raw
    }
    const what = `${method} ${path}`
    const url = this.url(path, options.query)
    const idempotent = isIdempotent(method, options.idempotent)
    const signal = deadlineSignal(timeoutMs, options.signal)
    const startedAt = Date.now()
    for (let attempt = 1; ; attempt++) {
      let failure: unknown
      let retryAfter: number | undefined
      let retryable: boolean
      try {
        const response = await this.#fetch(url, {
          method,
          headers,
          body: body as RequestInit['body'],
          signal,
        })
        if (response.ok) return response
        retryable = idempotent && isRetryableStatus(response.status)
        retryAfter = retryAfterMs(response.headers.get('retry-after'))
        failure = await this.#errorFromResponse(response, what)
      } catch (err) {
        failure = this.#translate(err, what, options, timeoutMs)
        // A refused connection sent nothing; any other failure may have reached the runner.
        retryable =
          !signal.aborted && failure instanceof ConnectionError && (idempotent || isConnectionRefused(err))
      }
      if (!retryable || attempt >= this.#retry.attempts) throw failure
      const delay = backoffDelayMs(this.#retry, attempt, retryAfter)
      if (Date.now() - startedAt + delay >= timeoutMs) throw failure
      try {
        await sleep(delay, signal)
      } catch (err) {
        throw this.#translate(err, what, options, timeoutMs)
      }
    }
  }

  /** The absolute URL of `path` with `query`. */
  url(path: string, query?: RequestOptions['query']): string {
    let url = this.baseUrl + path
    if (query) {
      const params = new URLSearchParams()
      for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v))
      const qs = params.toString()
      if (qs) url += `?${qs}`
    }
    return url
  }

  #translate(
    err: unknown,
    what: string,
    options: RequestOptions,
    timeoutMs = this.requestTimeoutMs,
  ): unknown {
    if (err instanceof ConchErrorClass) return err
    if (options.signal?.aborted) return options.signal.reason
    if (isTimeoutAbort(err)) return deadlineError(what, timeoutMs, err)
    return new ConnectionError(
      `${what} failed: could not reach the runner at ${this.baseUrl}; check the url and that the runner is up`,
      { cause: err },
    )
  }

  async #errorFromResponse(response: Response, what: string): Promise<ConchError> {
    let text = ''
    try {
      text = await response.text()
    } catch {
      // The status alone still says what happened.
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = undefined
    }
    const body = check(restErrorBody, parsed)
    const wire = body?.error ?? {
      code: codeForStatus(response.status),
      message: `HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`,
    }
    return errorFromWire({ ...wire, message: `${what}: ${wire.message}` }, { status: response.status })
  }
}

/** The code for an error answer that carries no `ErrorBody` (a proxy's page, say). */
function codeForStatus(status: number): string {
  if (status === 401) return 'UNAUTHORIZED'
  if (status === 403) return 'FORBIDDEN'
  if (status === 404) return 'NOT_FOUND'
  if (status === 429) return 'RATE_LIMITED'
  if (status === 503) return 'AGENT_UNAVAILABLE'
  if (status === 504) return 'DEADLINE_EXCEEDED'
  return status < 500 ? 'BAD_REQUEST' : 'INTERNAL'
}
