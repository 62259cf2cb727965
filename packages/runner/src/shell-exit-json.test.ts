import type { ShellExit } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { shellExitJson } from './shell-exit-json.ts'

/** Run ids a client may choose (any string of 1-128 UTF-16 units): quotes, controls, surrogates. */
const IDS = [
  'r1',
  '"',
  '\\',
  '</script>',
  '\u0000\u0001\u001f\u007f',
  '\n\r\t\b\f',
  '\u2028\u2029',
  'é中😀',
  '\ud800',
  'a\udfffb',
  '{"type":"shell_exit"}',
  'x'.repeat(128),
]

const NUMBERS = [0, -0, 1, 255, 0.1, 1.2345678901234567, 5e-324, 1e21, 2 ** 53 - 1, 123456789.125]

function exit(id: string, n: number, extra: { oomKilled?: boolean; startOffset?: number }): ShellExit {
  const frame: ShellExit = {
    type: 'shell_exit',
    id,
    code: Math.min(255, Math.floor(Math.abs(n))),
    timedOut: n > 1,
    durationMs: n,
    offset: Math.floor(Math.abs(n)),
  }
  if (extra.oomKilled !== undefined) frame.oomKilled = extra.oomKilled
  if (extra.startOffset !== undefined) frame.startOffset = extra.startOffset
  return frame
}

describe('shellExitJson', () => {
  it('writes exactly what JSON.stringify writes, for hostile ids and edge numbers', () => {
    for (const id of IDS)
      for (const n of NUMBERS)
        for (const extra of [
          {},
          { oomKilled: true },
          { startOffset: n },
          { oomKilled: false, startOffset: 0 },
        ]) {
          const frame = exit(id, n, extra)
          expect(shellExitJson(frame)).toBe(JSON.stringify(frame))
          expect(JSON.parse(shellExitJson(frame))).toEqual(JSON.parse(JSON.stringify(frame)))
        }
  })

  it('falls back to JSON.stringify for numbers JSON cannot hold', () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const frame = exit('r', 1, { startOffset: 1 })
      for (const field of ['durationMs', 'offset', 'code', 'startOffset'] as const) {
        const broken = { ...frame, [field]: bad }
        expect(shellExitJson(broken)).toBe(JSON.stringify(broken))
      }
    }
  })
})
