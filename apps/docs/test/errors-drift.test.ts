// The errors page and the protocol's codes must not drift: every `ErrorCode` has a guide entry
// and a section (an anchor) on the generated page, and nothing else does.
import { ERROR_STATUS, ErrorCode } from '@conch/protocol'
import { expect, it } from 'vitest'
import { errorAnchor, renderErrorsPage } from '../scripts/errors-page.ts'
import { ERROR_GUIDE } from '../src/error-guide.ts'

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
    expect(page, code).toContain(`](#${errorAnchor(code)})`)
  }
})
