// Attack: a shell client sends hostile versions of the frames every run brings (`shell_run`,
// `ack`), which the runner checks by hand before zod (client-frame-parser.ts). Every answer must
// be zod's: the same acceptance, the same parsed object (unknown fields dropped), the same error
// code and message, for oversize and broken text too.
import { isDeepStrictEqual } from 'node:util'
import { CLIENT_FRAME_TYPES, ClientFrame, parseJsonFrame } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { parseClientFrame, readPlainRun } from '../../src/client-frame-parser.ts'

const MAX = 4096

const VALID: Record<string, unknown>[] = [
  { type: 'shell_run', id: 'r1', command: 'true' },
  { type: 'shell_run', id: 'r', command: '', timeoutMs: 1, stdin: 'aGk=', stdinEncoding: 'base64' },
  {
    type: 'shell_run',
    id: 'x'.repeat(128),
    command: 'cat',
    stdin: 'hi',
    stdinEncoding: 'utf8',
    stdinPipe: false,
  },
  { type: 'shell_run', id: 'p', command: 'cat', stdinPipe: true, timeoutMs: 2_147_483_647 },
  { type: 'ack', offset: 0 },
  { type: 'ack', offset: 2 ** 53 - 1 },
  { type: 'ping', t: 1.5 },
  { type: 'hello', protocolVersion: 1, capabilities: ['output_ack'] },
]

const HOSTILE: unknown[] = [
  null,
  true,
  0,
  -0,
  -1,
  1.5,
  2_147_483_648,
  2 ** 53,
  1e300,
  '',
  '1',
  'utf16',
  'base64',
  'x'.repeat(129),
  '😀'.repeat(64),
  '😀'.repeat(65),
  '😀'.repeat(129),
  [],
  {},
  { toString: 'x' },
]

function corpus(): string[] {
  const out = ['', 'null', '1', '"shell_run"', '[]', '{}', '{"type":"shell_run"', 'x'.repeat(MAX + 1)]
  for (const frame of VALID) {
    out.push(JSON.stringify(frame))
    const keys = [
      ...Object.keys(frame),
      'timeoutMs',
      'stdin',
      'stdinEncoding',
      'stdinPipe',
      'offset',
      'extra',
    ]
    for (const key of keys) {
      for (const value of HOSTILE) out.push(JSON.stringify({ ...frame, [key]: value }))
      const without = { ...frame }
      delete without[key]
      out.push(JSON.stringify(without))
    }
    out.push(`{"__proto__":{"command":"x","id":"y"},${JSON.stringify(frame).slice(1)}`)
    out.push(`${JSON.stringify(frame).slice(0, -1)},"__proto__":{"polluted":1}}`)
    out.push(JSON.stringify({ ...frame, command: 'a'.repeat(MAX) }))
    for (const type of ['shell_run', 'ack', 'shell_stdin', 'nope'])
      out.push(JSON.stringify({ ...frame, type }))
  }
  return out
}

describe('attack: hostile run frames from a shell client', () => {
  it('gets exactly the answer zod gives, for every frame of the corpus', () => {
    const texts = corpus()
    let accepted = 0
    for (const text of texts) {
      const ours = parseClientFrame(text, MAX)
      const zods = parseJsonFrame(ClientFrame, text, 'type', CLIENT_FRAME_TYPES, MAX)
      if (!isDeepStrictEqual(ours, zods)) expect({ text, answer: ours }).toEqual({ text, answer: zods })
      if (ours.ok) accepted += 1
    }
    expect(accepted).toBeGreaterThan(VALID.length)
    expect(texts.length - accepted).toBeGreaterThan(300)
  })

  it("reads the SDK's plain run frame by hand, and answers as zod for that layout bent every way", () => {
    const plain = (id: string, command: string) => `{"type":"shell_run","id":"${id}","command":"${command}"}`
    const canonical = [
      plain('r1', 'true'),
      plain('s3.12', 'echo hi > /tmp/x; ls -la'),
      plain('x'.repeat(128), ''),
      plain('é', '日本 😀'),
    ]
    const texts: string[] = []
    for (const text of canonical) {
      expect(readPlainRun(text), text).not.toBeUndefined()
      texts.push(text)
      for (let i = 0; i <= text.length; i++) {
        texts.push(text.slice(0, i))
        for (const extra of [' ', '"', '\\', '}', ',', '\n', '\u0000', '\u001f', 'x'])
          texts.push(text.slice(0, i) + extra + text.slice(i))
      }
      for (let i = 0; i < text.length; i++) texts.push(text.slice(0, i) + text.slice(i + 1))
    }
    for (const id of ['', 'x'.repeat(129), '😀'.repeat(64), '😀'.repeat(65), 'a\\"b', 'a\\u0041', '\u2028'])
      texts.push(plain(id, 'true'))
    for (const command of ['a\\nb', 'a\\"b', '\\u0041', 'tab\there', 'a'.repeat(MAX)])
      texts.push(plain('r', command))
    texts.push(
      '{"type":"shell_run","id":"r","command":"true","id":"s"}',
      '{"type":"shell_run","id":"r","command":"true","command":"false"}',
      '{"type":"shell_run","command":"true","id":"r"}',
      '{"type":"shell_run","id":"r","command":"true"}}',
      '{"type":"shell_run","id":"r","command":"true"} ',
      '{"type":"shell_run","id":"r","command":"true"',
    )
    for (const text of texts) {
      const ours = parseClientFrame(text, MAX)
      const zods = parseJsonFrame(ClientFrame, text, 'type', CLIENT_FRAME_TYPES, MAX)
      if (!isDeepStrictEqual(ours, zods)) expect({ text, answer: ours }).toEqual({ text, answer: zods })
    }
  })

  it('refuses the typical attacks with their codes', () => {
    expect(parseClientFrame('x'.repeat(MAX + 1), MAX)).toMatchObject({
      ok: false,
      error: { code: 'FRAME_TOO_LARGE' },
    })
    expect(parseClientFrame('{"type":"shell_run",', MAX)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_FRAME' },
    })
    const cases: [Record<string, unknown>, string][] = [
      [{ type: 'shell_run', id: 'r', command: 1 }, 'command'],
      [{ type: 'shell_run', id: '', command: 'true' }, 'id'],
      [{ type: 'shell_run', id: 'r', command: 'true', timeoutMs: 0 }, 'timeoutMs'],
      [{ type: 'shell_run', id: 'r', command: 'true', stdinEncoding: 'hex' }, 'stdinEncoding'],
      [{ type: 'shell_run', id: 'r', command: 'true', stdinPipe: 'yes' }, 'stdinPipe'],
      [{ type: 'ack', offset: -1 }, 'offset'],
    ]
    for (const [frame, field] of cases) {
      const parsed = parseClientFrame(JSON.stringify(frame), MAX)
      expect(parsed).toMatchObject({ ok: false, error: { code: 'INVALID_FRAME' } })
      if (!parsed.ok) expect(parsed.error.message).toContain(field)
    }
    // Extra fields never reach the runner's run request.
    const run = parseClientFrame(
      '{"type":"shell_run","id":"r","command":"true","sessionId":"other","env":{}}',
      MAX,
    )
    expect(run).toEqual({ ok: true, value: { type: 'shell_run', id: 'r', command: 'true' } })
  })
})
