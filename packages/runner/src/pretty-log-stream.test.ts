import { describe, expect, it } from 'vitest'
import { formatLogLine, prettyLogStream } from './pretty-log-stream.ts'

const TIME = new Date(2026, 0, 2, 3, 4, 5).getTime()

describe('formatLogLine', () => {
  it('writes the time, the level and the message, then the other fields as key=value', () => {
    const line = JSON.stringify({
      level: 40,
      time: TIME,
      pid: 1,
      hostname: 'h',
      sandboxId: 'sb_1',
      allowed: ['a', 'b'],
      n: 3,
      msg: 'hi',
    })
    expect(formatLogLine(line, false)).toBe('03:04:05 WARN  hi sandboxId=sb_1 allowed=a,b n=3\n')
  })

  it('leaves out the fields a request line already says', () => {
    const line = JSON.stringify({
      level: 30,
      time: TIME,
      reqId: 'req-1',
      method: 'GET',
      url: '/v1/x',
      statusCode: 200,
      responseTime: 1.5,
      msg: 'GET /v1/x 200 1.5ms',
    })
    expect(formatLogLine(line, false)).toBe('03:04:05 INFO  GET /v1/x 200 1.5ms reqId=req-1\n')
  })

  it('quotes values with spaces and adds an error message, with its stack only at error level', () => {
    const err = { type: 'Error', message: 'boom', stack: 'Error: boom\n    at f (x.ts:1:1)' }
    expect(
      formatLogLine(JSON.stringify({ level: 30, time: TIME, note: 'a b', err, msg: 'it failed' }), false),
    ).toBe('03:04:05 INFO  it failed: boom note="a b"\n')
    expect(formatLogLine(JSON.stringify({ level: 50, time: TIME, err, msg: 'it failed' }), false)).toBe(
      '03:04:05 ERROR it failed: boom\n    at f (x.ts:1:1)\n',
    )
  })

  it('colours only when asked', () => {
    const line = JSON.stringify({ level: 30, time: TIME, msg: 'm' })
    expect(formatLogLine(line, true)).toBe('\u001b[2m03:04:05\u001b[0m \u001b[32mINFO \u001b[0m m\n')
  })

  it('passes a line that is not a pino record through', () => {
    expect(formatLogLine('not json', false)).toBe('not json\n')
    expect(formatLogLine('[1,2]', false)).toBe('[1,2]\n')
  })
})

describe('prettyLogStream', () => {
  it('formats each line of a write', () => {
    let out = ''
    const stream = prettyLogStream({ write: (t) => (out += t) }, { color: false })
    stream.write(
      `${JSON.stringify({ level: 30, time: TIME, msg: 'one' })}\n${JSON.stringify({ level: 20, time: TIME, msg: 'two' })}\n`,
    )
    expect(out).toBe('03:04:05 INFO  one\n03:04:05 DEBUG two\n')
  })
})
