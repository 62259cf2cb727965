import { describe, expect, it } from 'vitest'
import { CLIENT_FRAME_TYPES, ClientFrame } from './client-frames.ts'
import { parseJsonFrame } from './frame-parse.ts'

const parse = (text: string, max = 1024) => parseJsonFrame(ClientFrame, text, 'type', CLIENT_FRAME_TYPES, max)

describe('parseJsonFrame', () => {
  it('accepts a valid shell_run', () => {
    const r = parse('{"type":"shell_run","id":"r1","command":"ls"}')
    expect(r).toEqual({ ok: true, value: { type: 'shell_run', id: 'r1', command: 'ls' } })
  })

  it.each([
    ['not json', '{', 'INVALID_FRAME'],
    ['an array', '[1]', 'INVALID_FRAME'],
    ['a number', '42', 'INVALID_FRAME'],
    ['null', 'null', 'INVALID_FRAME'],
    ['no type', '{"id":"r1"}', 'INVALID_FRAME'],
    ['a non-string type', '{"type":5}', 'INVALID_FRAME'],
    ['an unknown type', '{"type":"rm_rf"}', 'UNKNOWN_FRAME_TYPE'],
    ['a missing field', '{"type":"shell_run","id":"r1"}', 'INVALID_FRAME'],
    ['a wrong field type', '{"type":"shell_run","id":"r1","command":7}', 'INVALID_FRAME'],
    ['an empty run id', '{"type":"shell_run","id":"","command":"ls"}', 'INVALID_FRAME'],
    ['a negative timeout', '{"type":"shell_run","id":"r","command":"ls","timeoutMs":-1}', 'INVALID_FRAME'],
  ])('rejects %s with a code', (_name, text, code) => {
    const r = parse(text)
    expect(r.ok).toBe(false)
    if (!r.ok) {
      expect(r.error.code).toBe(code)
      expect(r.error.message.length).toBeGreaterThan(0)
    }
  })

  it('rejects an oversized frame before parsing it', () => {
    const r = parse(`{"type":"shell_run","id":"r1","command":"${'x'.repeat(2000)}"}`)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.error.code).toBe('FRAME_TOO_LARGE')
  })

  it('names the bad fields in its message', () => {
    const r = parse('{"type":"shell_run","id":"r1","command":7}')
    expect(!r.ok && r.error.message).toContain('command')
  })
})
