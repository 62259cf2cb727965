import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ServerFrame } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { mutations } from '../test/mutations.ts'
import { readServerFrame } from './server-frame.ts'

// The SDK reads server frames without zod. These tests hold it to the protocol's schema: on the
// golden frames and on every single-field mutation of them, both accept or both reject. The
// two deliberate differences are open lists: any capability name and any error code are read,
// so a newer runner does not break this SDK.

const golden: unknown[] = JSON.parse(
  readFileSync(join(import.meta.dirname, '../../protocol/test/fixtures/server-frames.json'), 'utf8'),
)

const sdkAccepts = (value: unknown): boolean => {
  const read = readServerFrame(JSON.stringify(value))
  return read.ok && read.frame !== null
}

const isOpenList = (frame: unknown, path: string): boolean => {
  const type = (frame as { type?: unknown }).type
  return (type === 'hello' && path.startsWith('capabilities.')) || (type === 'error' && path === 'code')
}

describe('readServerFrame', () => {
  it('reads every golden frame to the same value as the protocol schema', () => {
    for (const frame of golden) {
      const read = readServerFrame(JSON.stringify(frame))
      expect(read).toEqual({ ok: true, frame: ServerFrame.parse(frame) })
    }
  })

  it('accepts and rejects exactly what the protocol schema does, field by field', () => {
    let compared = 0
    for (const frame of golden) {
      for (const m of mutations(frame)) {
        if (m.path === 'type' || isOpenList(frame, m.path)) continue
        // JSON has no NaN; it travels as null.
        const wire = JSON.parse(JSON.stringify(m.value))
        expect(sdkAccepts(wire), `${JSON.stringify(frame)} with ${m.path} → ${JSON.stringify(wire)}`).toBe(
          ServerFrame.safeParse(wire).success,
        )
        compared++
      }
    }
    expect(compared).toBeGreaterThan(300)
  })

  it('reads capability names and error codes it does not know', () => {
    expect(sdkAccepts({ type: 'hello', protocolVersion: 1, capabilities: ['teleport'] })).toBe(true)
    expect(sdkAccepts({ type: 'error', id: null, code: 'NEW_CODE', message: 'm' })).toBe(true)
  })

  it('skips an unknown frame type and reports bad JSON', () => {
    expect(readServerFrame('{"type":"shell_future","x":1}')).toEqual({ ok: true, frame: null })
    expect(readServerFrame('{nope')).toMatchObject({ ok: false })
    expect(readServerFrame('[1]')).toMatchObject({ ok: false })
    expect(readServerFrame('{"type":7}')).toMatchObject({ ok: false })
  })

  it('names the bad field', () => {
    expect(
      readServerFrame(
        '{"type":"shell_exit","id":"r1","code":256,"timedOut":false,"durationMs":1,"offset":0}',
      ),
    ).toEqual({
      ok: false,
      message: 'invalid "shell_exit" frame: code: expected an integer >= 0 and <= 255',
    })
  })
  it('compiles each frame type once, not once per frame, and still checks every frame', () => {
    // Compiling a schema builds its patterns' RegExps; `shell_ready` has one (the session id).
    const ready = { type: 'shell_ready', sessionId: 's1', offset: 0, encoding: 'base64', running: null }
    expect(readServerFrame(JSON.stringify(ready)).ok).toBe(true)
    const Native = globalThis.RegExp
    let built = 0
    globalThis.RegExp = new Proxy(Native, {
      construct(target, args: [string]) {
        built++
        return new target(...args)
      },
    })
    try {
      for (let i = 0; i < 20; i++) expect(readServerFrame(JSON.stringify(ready)).ok).toBe(true)
      const hostile = readServerFrame(JSON.stringify({ ...ready, sessionId: '../etc' }))
      expect(hostile).toMatchObject({ ok: false, message: expect.stringContaining('sessionId') })
    } finally {
      globalThis.RegExp = Native
    }
    expect(built).toBe(0)
  })
})
