import { describe, expect, it } from 'vitest'
import {
  backoffDelayMs,
  isConnectionRefused,
  isIdempotent,
  NO_RETRY,
  retryAfterMs,
  retryPolicy,
} from './retry-policy.ts'

describe('retry policy', () => {
  it('reads Retry-After as seconds or as an HTTP date', () => {
    const now = Date.parse('Tue, 24 Nov 2026 12:00:00 GMT')
    expect(retryAfterMs('7', now)).toBe(7_000)
    expect(retryAfterMs('Tue, 24 Nov 2026 12:00:30 GMT', now)).toBe(30_000)
    expect(retryAfterMs('Tue, 24 Nov 2026 11:00:00 GMT', now)).toBe(0)
    expect(retryAfterMs('soon', now)).toBeUndefined()
    expect(retryAfterMs('-3', now)).toBeUndefined()
    expect(retryAfterMs(null, now)).toBeUndefined()
  })

  it('draws a full-jitter delay under a doubling ceiling capped at maxDelayMs', () => {
    const policy = { attempts: 9, baseDelayMs: 100, maxDelayMs: 1_000 }
    expect(backoffDelayMs(policy, 1, undefined, () => 0.999)).toBe(99)
    expect(backoffDelayMs(policy, 3, undefined, () => 0.999)).toBe(399)
    expect(backoffDelayMs(policy, 8, undefined, () => 0.999)).toBe(999)
    expect(backoffDelayMs(policy, 8, undefined, () => 0)).toBe(0)
  })

  it('waits what Retry-After asks, capped at maxDelayMs', () => {
    const policy = { attempts: 9, baseDelayMs: 100, maxDelayMs: 1_000 }
    expect(backoffDelayMs(policy, 1, 700)).toBe(700)
    expect(backoffDelayMs(policy, 1, 3_600_000)).toBe(1_000)
  })

  it('treats GET, PUT and DELETE as idempotent and a POST only when marked', () => {
    expect(isIdempotent('GET', undefined)).toBe(true)
    expect(isIdempotent('PUT', undefined)).toBe(true)
    expect(isIdempotent('DELETE', undefined)).toBe(true)
    expect(isIdempotent('POST', undefined)).toBe(false)
    expect(isIdempotent('POST', true)).toBe(true)
  })

  it('knows a refused connection from one that may have carried the request', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
    expect(isConnectionRefused(new TypeError('fetch failed', { cause: refused }))).toBe(true)
    expect(isConnectionRefused(new TypeError('fetch failed', { cause: reset }))).toBe(false)
    const mixed = Object.assign(new AggregateError([refused, reset]), { code: 'ECONNREFUSED' })
    expect(isConnectionRefused(new TypeError('fetch failed', { cause: mixed }))).toBe(false)
    expect(isConnectionRefused(new Error('no cause'))).toBe(false)
  })

  it('turns retry: false into one try and clamps nonsense', () => {
    expect(retryPolicy(false)).toEqual(NO_RETRY)
    expect(retryPolicy({ attempts: 0 }).attempts).toBe(1)
    expect(retryPolicy({ maxDelayMs: -5 }).maxDelayMs).toBe(0)
  })
})
