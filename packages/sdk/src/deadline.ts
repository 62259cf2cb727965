import { DeadlineError } from './conch-error.ts'

// Client-side deadlines: every request gets an AbortSignal that fires after its budget, joined
// with the caller's own signal when there is one.

/** A signal that aborts after `ms`, or when `outer` aborts. */
export function deadlineSignal(ms: number, outer?: AbortSignal): AbortSignal {
  const timeout = AbortSignal.timeout(ms)
  if (!outer) return timeout
  if (typeof AbortSignal.any === 'function') return AbortSignal.any([timeout, outer])
  const controller = new AbortController()
  const abort = (source: AbortSignal) => () => controller.abort(source.reason)
  if (outer.aborted) controller.abort(outer.reason)
  else {
    timeout.addEventListener('abort', abort(timeout), { once: true })
    outer.addEventListener('abort', abort(outer), { once: true })
  }
  return controller.signal
}

/** True when `err` is the abort of a timeout signal (a `TimeoutError` DOMException). */
export function isTimeoutAbort(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'name' in err && err.name === 'TimeoutError'
}

/** The error for a call that got no answer within `ms`. */
export function deadlineError(what: string, ms: number, cause?: unknown): DeadlineError {
  return new DeadlineError(
    `${what} got no answer within ${ms} ms; if it is expected to take longer, raise requestTimeoutMs`,
    { cause },
  )
}
