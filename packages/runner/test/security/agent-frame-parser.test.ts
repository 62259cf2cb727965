// Attack: an agent (user code in its sandbox may own it) sends hostile versions of the frames
// every run brings, which the runner checks by hand before zod (agent-frame-parser.ts). Every
// answer must be zod's: the same acceptance, the same parsed object (unknown fields dropped),
// the same error code and message. The corpus mutates each field of each such frame into the
// values an attacker would try: wrong types, out-of-range and unsafe numbers, oversize and
// astral-plane ids, missing and extra fields, `__proto__` keys.
import { isDeepStrictEqual } from 'node:util'
import { AGENT_FRAME_TYPES, AgentFrame, parseFrame } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { parseAgentFrame } from '../../src/agent-frame-parser.ts'

const VALID: Record<string, unknown>[] = [
  { type: 'result', id: 7, result: {} },
  { type: 'result', id: 0, result: { nested: [1, 2, { deep: true }] } },
  { type: 'result', id: 1, result: null },
  { type: 'shell_start', ch: 1, id: 'r1', offset: 0 },
  { type: 'shell_exit', ch: 1, id: 'r1', code: 0, timedOut: false, durationMs: 0.25, offset: 12 },
  {
    type: 'shell_exit',
    ch: 3,
    id: 'r',
    code: 137,
    timedOut: true,
    durationMs: 9,
    offset: 0,
    oomKilled: true,
  },
  {
    type: 'shell_exit',
    ch: 3,
    id: 'r',
    code: 255,
    timedOut: false,
    durationMs: 0,
    offset: 1,
    oomKilled: false,
  },
  { type: 'shell_out', ch: 2, id: 'r1', offset: 5 },
  { type: 'shell_out', ch: 2, id: null, offset: 5 },
  { type: 'shell_err', ch: 2 ** 31, id: 'x'.repeat(128), offset: 2 ** 53 - 1 },
  { type: 'data', ch: 9, offset: 100 },
  { type: 'credit', ch: 9, bytes: 65536 },
  { type: 'ping', n: 3 },
  { type: 'pong', n: -4 },
]

/** Values an attacker puts in a field. */
const HOSTILE: unknown[] = [
  null,
  true,
  false,
  0,
  -0,
  1,
  -1,
  1.5,
  256,
  2 ** 31,
  2 ** 31 + 1,
  2 ** 53 - 1,
  2 ** 53,
  -(2 ** 53),
  1e300,
  '',
  '1',
  'x'.repeat(128),
  'x'.repeat(129),
  '😀'.repeat(64),
  '😀'.repeat(65),
  '😀'.repeat(128),
  '😀'.repeat(129),
  [],
  [1],
  {},
  { length: 1 },
  'shell_exit',
]

/** Every frame of the corpus: the valid ones, each field mutated, removed, and extra fields. */
function corpus(): unknown[] {
  const out: unknown[] = [null, 1, 'shell_exit', [], [{ type: 'result' }], {}, { type: 7 }]
  for (const frame of VALID) {
    out.push(frame)
    for (const key of [...Object.keys(frame), 'oomKilled', 'startOffset', 'extra']) {
      for (const value of HOSTILE) out.push({ ...frame, [key]: value })
      const without = { ...frame }
      delete without[key]
      out.push(without)
    }
    out.push(JSON.parse(`{"__proto__":{"ch":1,"id":"r"},${JSON.stringify(frame).slice(1)}`))
    out.push(JSON.parse(`${JSON.stringify(frame).slice(0, -1)},"__proto__":{"polluted":1}}`))
    out.push({ ...frame, constructor: 'x', hasOwnProperty: 1 })
    for (const type of ['shell_start', 'shell_exit', 'shell_out', 'result', 'credit', 'hello', 'nope'])
      out.push({ ...frame, type })
  }
  return out
}

describe('attack: hostile run frames from the agent', () => {
  it('drops a startOffset an agent puts on an exit: only the runner puts a start inside an exit', () => {
    const frame = { type: 'shell_exit', ch: 1, id: 'r', code: 0, timedOut: false, durationMs: 1, offset: 9 }
    for (const startOffset of [0, 9, -1, 'x']) {
      const parsed = parseAgentFrame({ ...frame, startOffset })
      expect(parsed).toEqual({ ok: true, value: frame })
    }
  })

  it('gets exactly the answer zod gives, for every frame of the corpus', () => {
    const frames = corpus()
    let accepted = 0
    for (const frame of frames) {
      const ours = parseAgentFrame(frame)
      const zods = parseFrame(AgentFrame, frame, 'type', AGENT_FRAME_TYPES)
      if (!isDeepStrictEqual(ours, zods)) {
        expect({ frame, answer: ours }).toEqual({ frame, answer: zods })
      }
      if (ours.ok) {
        accepted += 1
        // A fresh object with the schema's fields only: nothing of the hostile header rides along.
        expect(ours.value).not.toBe(frame)
        expect(Object.getPrototypeOf(ours.value)).toBe(Object.prototype)
      }
    }
    // The corpus exercises both answers in bulk.
    expect(accepted).toBeGreaterThan(VALID.length)
    expect(frames.length - accepted).toBeGreaterThan(500)
  })

  it('refuses the typical attacks with INVALID_FRAME and a message naming the field', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ type: 'shell_exit', ch: 1, id: 'r', code: 256, timedOut: false, durationMs: 1, offset: 0 }, 'code'],
      [{ type: 'shell_exit', ch: 1, id: 'r', code: '0', timedOut: false, durationMs: 1, offset: 0 }, 'code'],
      [{ type: 'shell_exit', ch: 1, id: 'r', code: 0, timedOut: 0, durationMs: 1, offset: 0 }, 'timedOut'],
      [
        { type: 'shell_exit', ch: 1, id: 'r', code: 0, timedOut: false, durationMs: -1, offset: 0 },
        'durationMs',
      ],
      [{ type: 'shell_start', ch: 1, id: 'x'.repeat(129), offset: 0 }, 'id'],
      [{ type: 'shell_start', ch: 1, id: '', offset: 0 }, 'id'],
      [{ type: 'shell_start', ch: 2 ** 31 + 1, id: 'r', offset: 0 }, 'ch'],
      [{ type: 'shell_out', ch: 1, id: 'r', offset: 2 ** 53 }, 'offset'],
      [{ type: 'result', id: -1, result: {} }, 'id'],
      [{ type: 'credit', ch: 1, bytes: 0 }, 'bytes'],
    ]
    for (const [frame, field] of cases) {
      const parsed = parseAgentFrame(frame)
      expect(parsed.ok).toBe(false)
      if (parsed.ok) continue
      expect(parsed.error.code).toBe('INVALID_FRAME')
      expect(parsed.error.message).toContain(field)
    }
    expect(parseAgentFrame({ type: 'shell_exitt', ch: 1 })).toMatchObject({
      ok: false,
      error: { code: 'UNKNOWN_FRAME_TYPE' },
    })
  })
})
