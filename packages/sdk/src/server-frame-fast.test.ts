import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ServerFrame } from '@conch/protocol'
import { shapeOf } from '@conch/protocol/json-shape'
import { describe, expect, it } from 'vitest'
import { mutations } from '../test/mutations.ts'
import { readServerFrame } from './server-frame.ts'
import { fastShellExit, fastShellStart } from './server-frame-fast.ts'
import { SERVER_FRAME_SCHEMAS } from './wire-schemas.ts'

// The hand-written checks of the per-run frames against the schema check they shortcut: over
// the golden frames, every single-field mutation and a set of hostile frames, a fast check
// either declines or returns exactly what the schema check returns (same keys, same order), and
// never accepts a frame the schema or the protocol's zod rejects.

const golden: object[] = (
  JSON.parse(
    readFileSync(join(import.meta.dirname, '../../protocol/test/fixtures/server-frames.json'), 'utf8'),
  ) as { type: string }[]
).filter((f) => f.type === 'shell_exit' || f.type === 'shell_start')

const exit = { type: 'shell_exit', id: 'a.1', code: 0, timedOut: false, durationMs: 1, offset: 0 }
const start = { type: 'shell_start', id: 'a.1', offset: 0 }

/** Frames an adversary controlling the runner's socket might send, as JSON text. */
const hostileTexts: string[] = [
  ...[
    { ...exit, code: -0 },
    { ...exit, code: 255.0000000001 },
    { ...exit, code: '0' },
    { ...exit, code: 1e308 },
    { ...exit, durationMs: -0 },
    { ...exit, durationMs: 1e308 },
    { ...exit, durationMs: '1' },
    { ...exit, offset: 2 ** 53 - 1 },
    { ...exit, offset: 2 ** 53 },
    { ...exit, offset: -1 },
    { ...exit, id: 'x'.repeat(128) },
    { ...exit, id: 'x'.repeat(129) },
    { ...exit, id: '' },
    { ...exit, id: ['a'] },
    { ...exit, timedOut: 0 },
    { ...exit, timedOut: 'false' },
    { ...exit, oomKilled: null },
    { ...exit, oomKilled: false },
    { ...exit, startOffset: null },
    { ...exit, startOffset: 1.5 },
    { ...exit, startOffset: 3 },
    { ...exit, extra: { nested: [1] }, constructor: 'x', toString: 1, hasOwnProperty: 2 },
    { ...start, offset: 1.5 },
    { ...start, id: null },
    { ...start, extra: 1 },
  ].map((v) => JSON.stringify(v)),
  // `__proto__` in JSON text is an own key of the parsed object, not its prototype.
  '{"type":"shell_exit","__proto__":{"id":"p","code":0,"timedOut":false,"durationMs":1,"offset":0}}',
  '{"type":"shell_exit","id":"a","code":0,"timedOut":false,"durationMs":1,"offset":0,"__proto__":{"oomKilled":7}}',
  '{"type":"shell_start","__proto__":{"id":"p","offset":0}}',
  '{"type":"shell_exit","id":"a","id":7,"code":0,"timedOut":false,"durationMs":1,"offset":0}',
  '{"type":"shell_exit","id":"a","code":0,"code":256,"timedOut":false,"durationMs":1,"offset":0}',
]

const hostile: Record<string, unknown>[] = [
  ...golden.flatMap((f) => [f, ...mutations(f).map((m) => JSON.parse(JSON.stringify(m.value)))]),
  ...hostileTexts.map((t) => JSON.parse(t)),
].filter((v) => typeof v === 'object' && v !== null && !Array.isArray(v))

const schemaCheck = (v: Record<string, unknown>): unknown => {
  const schema = v.type === 'shell_exit' ? SERVER_FRAME_SCHEMAS.shell_exit : SERVER_FRAME_SCHEMAS.shell_start
  try {
    return shapeOf(schema!)(v, '')
  } catch {
    return 'rejected'
  }
}

const fastCheck = (v: Record<string, unknown>): unknown =>
  v.type === 'shell_exit' ? fastShellExit(v) : v.type === 'shell_start' ? fastShellStart(v) : undefined

describe('fast checks of the per-run frames', () => {
  it('were written against the schemas the protocol generates today (update them with it)', () => {
    // A field added to or changed in either frame must be added to server-frame-fast.ts too:
    // the fast checks build their result from the fields they know.
    const int = { type: 'integer', minimum: 0 }
    const runId = { type: 'string', minLength: 1, maxLength: 128 }
    expect(SERVER_FRAME_SCHEMAS.shell_exit).toStrictEqual({
      type: 'object',
      properties: {
        type: { type: 'string', const: 'shell_exit' },
        id: runId,
        code: { type: 'integer', minimum: 0, maximum: 255 },
        timedOut: { type: 'boolean' },
        durationMs: { type: 'number', minimum: 0 },
        offset: int,
        oomKilled: { type: 'boolean' },
        startOffset: int,
      },
      required: ['type', 'id', 'code', 'timedOut', 'durationMs', 'offset'],
    })
    expect(SERVER_FRAME_SCHEMAS.shell_start).toStrictEqual({
      type: 'object',
      properties: { type: { type: 'string', const: 'shell_start' }, id: runId, offset: int },
      required: ['type', 'id', 'offset'],
    })
  })

  it('take the golden frames, so runs do use them', () => {
    for (const frame of golden) expect(fastCheck(frame as Record<string, unknown>)).toEqual(frame)
  })

  it('return exactly what the schema check returns, or decline, over hostile frames', () => {
    let accepted = 0
    let declined = 0
    for (const v of hostile) {
      if (v.type !== 'shell_exit' && v.type !== 'shell_start') continue
      const fast = fastCheck(v)
      const slow = schemaCheck(v)
      if (fast === undefined) {
        declined++
        continue
      }
      accepted++
      expect(slow, JSON.stringify(v)).not.toBe('rejected')
      expect(ServerFrame.safeParse(v).success, JSON.stringify(v)).toBe(true)
      // Same keys in the same order, same values (-0 included).
      expect(Object.entries(fast as object), JSON.stringify(v)).toStrictEqual(Object.entries(slow as object))
      expect(fast).toStrictEqual(slow)
    }
    expect(accepted).toBeGreaterThan(20)
    expect(declined).toBeGreaterThan(40)
  })

  it('leave readServerFrame accepting exactly what the protocol schema accepts', () => {
    for (const v of hostile) {
      const read = readServerFrame(JSON.stringify(v))
      const zod = ServerFrame.safeParse(v)
      expect(read.ok && read.frame !== null, JSON.stringify(v)).toBe(zod.success)
      if (read.ok && zod.success) expect(read.frame).toEqual(zod.data)
    }
    for (const text of hostileTexts) {
      const read = readServerFrame(text)
      const zod = ServerFrame.safeParse(JSON.parse(text))
      expect(read.ok && read.frame !== null, text).toBe(zod.success)
    }
  })

  it('ignore a polluted prototype, as the schema check does', () => {
    const proto = Object.prototype as Record<string, unknown>
    proto.oomKilled = 'yes'
    proto.id = 'from-prototype'
    try {
      const bare = JSON.parse('{"type":"shell_exit","code":0,"timedOut":false,"durationMs":1,"offset":0}')
      expect(fastShellExit(bare)).toBeUndefined()
      expect(readServerFrame(JSON.stringify(bare)).ok).toBe(false)
      const frame = fastShellExit({ ...exit })
      expect(frame && Object.hasOwn(frame, 'oomKilled')).toBe(false)
    } finally {
      delete proto.oomKilled
      delete proto.id
    }
  })
})
