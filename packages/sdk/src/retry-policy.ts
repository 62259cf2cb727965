// When and how long the SDK waits before it sends a REST call again. A call is sent again
// only when doing so cannot do its work twice: the runner answered 429 or 503 to an idempotent
// call, or the connection failed on an idempotent call, or the connection was refused (nothing
// reached the runner). The wait is exponential backoff with full jitter, or the runner's
// `Retry-After` when it sends one, capped at `maxDelayMs`.

/**
 * How the SDK retries REST calls the runner refused for now (429, 503) or could not take
 * (connection failures). Pass `retry: false` in the connect options to turn retries off.
 *
 * @example
 * ```ts
 * const sb = await Sandbox.create({ url, apiKey, retry: { attempts: 6, maxDelayMs: 5_000 } })
 * ```
 */
export interface RetryPolicy {
  /** Tries in all, the first included; `1` never retries. Default 4. */
  attempts: number
  /** First backoff step; each further try doubles it. Default 200 ms. */
  baseDelayMs: number
  /** Longest wait before one try, also the cap on a `Retry-After`. Default 5 s. */
  maxDelayMs: number
}

/** The policy used when the connect options say nothing. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = { attempts: 4, baseDelayMs: 200, maxDelayMs: 5_000 }

/** A policy that never retries (`retry: false`). */
export const NO_RETRY: RetryPolicy = { attempts: 1, baseDelayMs: 0, maxDelayMs: 0 }

/** The policy for the connect option `retry`. */
export function retryPolicy(option: Partial<RetryPolicy> | false | undefined): RetryPolicy {
  if (option === false) return NO_RETRY
  const policy = { ...DEFAULT_RETRY_POLICY, ...option }
  return {
    attempts: Math.max(1, Math.floor(policy.attempts)),
    baseDelayMs: Math.max(0, policy.baseDelayMs),
    maxDelayMs: Math.max(0, policy.maxDelayMs),
  }
}

/** HTTP statuses that mean "not now": the runner did not do the work and may later. */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || status === 503
}

/**
 * Whether a call may be sent twice without doing its work twice: GET, PUT and DELETE by HTTP's
 * rules, a POST only when the caller marks it (the API makes a few POSTs idempotent).
 */
export function isIdempotent(method: string, marked: boolean | undefined): boolean {
  if (marked !== undefined) return marked
  return method === 'GET' || method === 'HEAD' || method === 'PUT' || method === 'DELETE'
}

/**
 * True when a fetch failure means the connection was never made (refused), so the request did
 * not reach the runner. Node's fetch reports it as a `cause` with code `ECONNREFUSED`, or an
 * AggregateError of those when several addresses were tried.
 */
export function isConnectionRefused(err: unknown): boolean {
  const cause = (err as { cause?: unknown } | null)?.cause
  const codeOf = (e: unknown) => (e as { code?: unknown } | null)?.code
  if (codeOf(cause) === 'ECONNREFUSED') {
    const inner = (cause as { errors?: unknown }).errors
    return !Array.isArray(inner) || inner.every((e) => codeOf(e) === 'ECONNREFUSED')
  }
  return false
}

/**
 * Milliseconds a `Retry-After` header asks for (delay-seconds or an HTTP date), or `undefined`
 * when absent or unreadable.
 */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null) return undefined
  const value = header.trim()
  if (/^\d+$/.test(value)) return Number(value) * 1000
  // An HTTP date names its day and month; `Date.parse` alone would accept `-3` as a year.
  if (!/[a-z]/i.test(value)) return undefined
  const date = Date.parse(value)
  if (Number.isNaN(date)) return undefined
  return Math.max(0, date - now)
}

/**
 * The wait before try number `retry` (1 for the first retry): the runner's `Retry-After` when
 * given, else a random delay between 0 and `baseDelayMs * 2^(retry-1)` (full jitter); both
 * capped at `maxDelayMs`.
 */
export function backoffDelayMs(
  policy: RetryPolicy,
  retry: number,
  retryAfter: number | undefined,
  random: () => number = Math.random,
): number {
  if (retryAfter !== undefined) return Math.min(retryAfter, policy.maxDelayMs)
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1))
  return Math.floor(random() * ceiling)
}

/** Waits `ms`, or rejects with the signal's reason as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason)
      return
    }
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
