import { describe, expect, test } from 'vitest'
import { externalRunner } from '../harness/external-runner.ts'

describe('external runner option', () => {
  test('is off when neither variable is set', () => {
    expect(externalRunner({})).toBeNull()
  })

  test('names the runner and key given, without a trailing slash', () => {
    const runner = externalRunner({ CONCH_E2E_URL: 'http://127.0.0.1:7878/', CONCH_E2E_API_KEY: 'conch_k' })
    expect(runner?.url).toBe('http://127.0.0.1:7878')
    expect(runner?.apiKey).toBe('conch_k')
    expect(runner?.isRunning()).toBe(true)
  })

  test('refuses a URL without a key, a key without a URL, and a non-http URL', () => {
    expect(() => externalRunner({ CONCH_E2E_URL: 'http://127.0.0.1:7878' })).toThrow(/CONCH_E2E_API_KEY/)
    expect(() => externalRunner({ CONCH_E2E_API_KEY: 'conch_k' })).toThrow(/CONCH_E2E_URL/)
    expect(() => externalRunner({ CONCH_E2E_URL: 'file:///etc/passwd', CONCH_E2E_API_KEY: 'k' })).toThrow(
      /http/,
    )
  })
})
