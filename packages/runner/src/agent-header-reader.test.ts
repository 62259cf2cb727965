// The agent's frame headers are read by hand when they are run frames in the agent's layout,
// and by JSON.parse otherwise; the answer must be JSON.parse's for every text. A hostile agent
// writes whatever bytes it likes, so the texts here are the agent's layout bent every way:
// escapes, control characters, numbers at and past the hand reader's bounds, whitespace,
// missing, extra, repeated and reordered keys, truncations and trailing bytes.
import { describe, expect, it } from 'vitest'
import { readAgentHeader, readRunFrame } from './agent-header-reader.ts'

/** What JSON.parse makes of `text`, or the error class it throws. */
function parsed(text: string): unknown {
  try {
    return { value: JSON.parse(text) }
  } catch (error) {
    return { throws: (error as Error).constructor.name }
  }
}

function read(text: string): unknown {
  try {
    return { value: readAgentHeader(text) }
  } catch (error) {
    return { throws: (error as Error).constructor.name }
  }
}

/** The same value, with the same keys in the same order, at every level. */
function expectSame(text: string): void {
  const want = parsed(text)
  const got = read(text)
  expect(got, text).toStrictEqual(want)
  expect(JSON.stringify(got), text).toBe(JSON.stringify(want))
  const a = (got as { value?: unknown }).value
  const b = (want as { value?: unknown }).value
  if (typeof a === 'object' && a !== null) expect(Object.keys(a), text).toEqual(Object.keys(b as object))
}

const start = (id: string, offset: string | number = 12, ch: string | number = 1) =>
  `{"type":"shell_start","id":${id},"offset":${offset},"ch":${ch}}`
const exit = (
  o: {
    id?: string
    code?: string
    timedOut?: string
    durationMs?: string
    offset?: string
    oom?: string
    ch?: string
  } = {},
) =>
  `{"type":"shell_exit","id":${o.id ?? '"r1"'},"code":${o.code ?? '0'},"timedOut":${o.timedOut ?? 'false'},"durationMs":${o.durationMs ?? '0.412'},"offset":${o.offset ?? '40'}${o.oom === undefined ? '' : `,"oomKilled":${o.oom}`},"ch":${o.ch ?? '1'}}`
const output = (type: string, id: string, offset = '7', ch = '2') =>
  `{"type":"${type}","id":${id},"offset":${offset},"ch":${ch}}`
const result = (id: string, body = '{}') => `{"type":"result","id":${id},"result":${body}}`

/** Run ids as JSON strings: plain, empty, unicode, and every kind of character that needs care. */
const IDS = [
  '"r1"',
  '""',
  '"p12345"',
  `"${'x'.repeat(128)}"`,
  '"é日本"',
  '"\u2028\u2029"',
  '"\ud83d\ude00"',
  '"a\\"b"',
  '"a\\\\b"',
  '"a\\nb"',
  '"a\\u0041"',
  '"a\\/b"',
  '"tab\there"',
  '"nl\nhere"',
  '"nul\u0000"',
  '"\u001f"',
  '"a"b"',
  '"open',
  'null',
  '1',
  'true',
  '{}',
  '[]',
]

/** Integers as JSON text, at and past the hand reader's bounds, and things that are not integers. */
const INTS = [
  '0',
  '1',
  '9',
  '10',
  '42',
  '999999999999999',
  '1000000000000000',
  '9007199254740991',
  '9007199254740993',
  '123456789012345678901234567890',
  '00',
  '01',
  '-0',
  '-1',
  '1.0',
  '1.5',
  '1e3',
  '1E+2',
  '0x10',
  '+1',
  '.5',
  '1.',
  'NaN',
  'Infinity',
  '"1"',
  'null',
  'true',
  '',
  ' 1',
  '1 ',
]

/** Numbers as JSON text for durationMs, including every part of the grammar and its edges. */
const NUMBERS = [
  ...INTS,
  '0.412',
  '12.25',
  '0.1',
  '0.30000000000000004',
  '123456.789e-3',
  '1e-7',
  '5e-324',
  '2e-324',
  '1.7976931348623157e308',
  '1e309',
  '-0.0',
  '-1.5',
  '1.5e',
  '1.5e+',
  '1.5E-2',
  '1..5',
  '1.5.5',
  '01.5',
  '-',
  '--1',
]

describe('readAgentHeader', () => {
  it('reads the run frames of the agent layout by hand, as JSON.parse would', () => {
    const canonical = [
      result('1'),
      result('123456'),
      start('"r1"'),
      start('"p9"', 0, 0),
      exit(),
      exit({ code: '255', timedOut: 'true', durationMs: '30000.5', offset: '123456789', ch: '7' }),
      exit({ oom: 'true' }),
      exit({ oom: 'false' }),
      output('shell_out', '"r1"'),
      output('shell_err', 'null'),
    ]
    for (const text of canonical) {
      expect(readRunFrame(text), text).not.toBeUndefined()
      expectSame(text)
    }
  })

  it('answers as JSON.parse for hostile ids, integers and numbers in every field', () => {
    const texts: string[] = []
    for (const id of IDS) {
      texts.push(start(id), exit({ id }), output('shell_out', id), output('shell_err', id), result(id))
    }
    for (const n of INTS) {
      texts.push(start('"r1"', n), start('"r1"', 1, n), result(n))
      texts.push(
        exit({ code: n }),
        exit({ offset: n }),
        exit({ ch: n }),
        output('shell_out', '"r"', n),
        output('shell_err', 'null', '1', n),
      )
    }
    for (const n of NUMBERS) texts.push(exit({ durationMs: n }))
    for (const b of ['true', 'false', 'null', '0', '"true"', 'tru', 'falsey', 'True']) {
      texts.push(exit({ timedOut: b }), exit({ oom: b }))
    }
    for (const body of ['{}', '{ }', '{"a":1}', '[]', 'null', '{}}', '{']) texts.push(result('1', body))
    for (const text of texts) expectSame(text)
  })

  it('answers as JSON.parse for whitespace, reordered, missing, extra and repeated keys, truncations and trailing bytes', () => {
    const base = [
      result('5'),
      start('"r1"'),
      exit(),
      exit({ oom: 'true' }),
      output('shell_out', '"r1"'),
      output('shell_err', 'null'),
    ]
    const texts: string[] = []
    for (const text of base) {
      // Every prefix and every one-character insertion of a few kinds at every position.
      for (let i = 0; i <= text.length; i++) {
        texts.push(text.slice(0, i))
        for (const extra of [' ', '\n', '"', '}', ',', '0', 'x', '\\'])
          texts.push(text.slice(0, i) + extra + text.slice(i))
      }
      // Every one-character deletion.
      for (let i = 0; i < text.length; i++) texts.push(text.slice(0, i) + text.slice(i + 1))
      texts.push(`${text} `, ` ${text}`, `${text}}`, `${text}x`, `[${text}]`)
    }
    texts.push(
      '{"type":"shell_start","offset":1,"id":"r1","ch":1}',
      '{"type":"shell_start","id":"r1","offset":1,"ch":1,"ch":2}',
      '{"type":"shell_start","id":"r1","id":"r2","offset":1,"ch":1}',
      '{"type":"shell_start","id":"r1","offset":1,"ch":1,"extra":true}',
      '{"type":"shell_start","id":"r1","offset":1}',
      '{"type":"shell_exit","id":"r1","code":0,"timedOut":false,"durationMs":1,"offset":1,"oomKilled":true,"oomKilled":false,"ch":1}',
      '{"type":"shell_exit","id":"r1","code":0,"timedOut":false,"durationMs":1,"ch":1,"offset":1}',
      '{"type":"result","id":1,"result":{},"id":2}',
      '{"type":"shell_startx","id":"r1","offset":1,"ch":1}',
      '{"type":"shell_outx","id":"r1","offset":1,"ch":1}',
      '{"type":"shell_exit","id":"r1"}',
      '{"type":"result"}',
      '{"type":"shell_start","id":"r1","offset":1,"ch":1}\u0000',
      '',
      '{',
      'null',
    )
    for (const text of texts) expectSame(text)
  })
})
