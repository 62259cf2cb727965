import { describe, expect, it } from 'vitest'
import { sandboxBaseEnv } from './sandbox-base-env.ts'

describe('sandboxBaseEnv', () => {
  it('names the user as both USER and LOGNAME beside PATH, HOME, LANG and TERM', () => {
    expect(sandboxBaseEnv({ user: 'sandbox', home: '/workspace', path: '/usr/bin:/bin' })).toEqual({
      PATH: '/usr/bin:/bin',
      HOME: '/workspace',
      USER: 'sandbox',
      LOGNAME: 'sandbox',
      LANG: 'C.UTF-8',
      TERM: 'dumb',
    })
  })
})
