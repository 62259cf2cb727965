// The errors page and the protocol's codes must not drift: every `ErrorCode` has a guide entry
// and a section (an anchor) on the generated page, and nothing else does; and the SDK class the page
// names for a code is the one @conch/sdk really rejects with.
import { ERROR_STATUS, ERROR_SUGGESTIONS, ErrorCode } from '@conch/protocol'
import {
  AuthError,
  ConchError,
  ConnectionError,
  DeadlineError,
  OutputLostError,
  RateLimitError,
  Sandbox,
  SandboxNotFoundError,
  SessionNotFoundError,
  ShellClosedError,
} from '@conch/sdk'
import { expect, it } from 'vitest'
import { detailFields, errorAnchor, renderErrorsPage } from '../scripts/errors-page.ts'
import { ERROR_GUIDE, type SdkErrorClass } from '../src/error-guide.ts'

const SDK_CLASSES: Record<SdkErrorClass, unknown> = {
  ConchError,
  ShellClosedError,
  SandboxNotFoundError,
  SessionNotFoundError,
  AuthError,
  RateLimitError,
  OutputLostError,
  ConnectionError,
  DeadlineError,
}

it('has a guide entry for exactly the protocol error codes', () => {
  expect(Object.keys(ERROR_GUIDE).sort()).toEqual([...ErrorCode.options].sort())
  for (const code of ErrorCode.options) {
    expect(ERROR_GUIDE[code].when.length, code).toBeGreaterThan(20)
    expect(ERROR_GUIDE[code].fix.length, code).toBeGreaterThan(20)
  }
})

it('renders one section per error code with its HTTP status', () => {
  const page = renderErrorsPage()
  const sections = [...page.matchAll(/^## (\S+)$/gm)].map((m) => m[1])
  expect(sections).toEqual([...ErrorCode.options])
  for (const code of ErrorCode.options) {
    const section = page.split(`## ${code}\n`)[1]?.split('\n## ')[0] ?? ''
    expect(section, code).toContain(`HTTP status **${ERROR_STATUS[code]}**`)
    expect(section, code).toContain(`**The SDK suggests**: ${ERROR_SUGGESTIONS[code]}.`)
    expect(section, code).toContain(`**Details**: ${detailFields(code)}.`)
    expect(page, code).toContain(`](#${errorAnchor(code)})`)
  }
})

it('names the class the SDK really rejects with for each code, whose message ends in its one suggestion', async () => {
  const wrong: string[] = []
  for (const code of ErrorCode.options) {
    // The SDK takes `fetch` as an option; this one answers every request with the error.
    const fetch = async (): Promise<Response> =>
      new Response(JSON.stringify({ error: { code, message: `a ${code} error` } }), {
        status: ERROR_STATUS[code],
        headers: { 'content-type': 'application/json' },
      })
    const error: unknown = await Sandbox.connect('sb_0123456789ab', {
      url: 'http://runner.invalid',
      apiKey: 'conch_docs_test_key',
      fetch,
    }).catch((e: unknown) => e)
    const expected = SDK_CLASSES[ERROR_GUIDE[code].sdkClass]
    if (!(error instanceof ConchError) || error.constructor !== expected || error.code !== code) {
      wrong.push(`${code}: got ${error instanceof Error ? error.constructor.name : String(error)}`)
    } else if (
      !error.message.endsWith(`: a ${code} error; ${ERROR_SUGGESTIONS[code]}`) ||
      Object.values(ERROR_SUGGESTIONS).some(
        (other) => other !== error.suggestion && error.message.includes(other),
      )
    ) {
      wrong.push(`${code}: message "${error.message}" does not end in exactly the code's suggestion`)
    }
  }
  expect(wrong).toEqual([])
})
