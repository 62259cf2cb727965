import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { AgentFrame, ClientFrame, decodeOutputFrame, HostFrame, ServerFrame } from '../src/index.ts'

// Golden frames are what deployed peers send today. They must keep parsing as the protocol grows.
const fixture = (name: string): unknown[] =>
  JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', name), 'utf8'))

describe('golden frames', () => {
  const cases = [
    ['client-frames.json', ClientFrame],
    ['server-frames.json', ServerFrame],
    ['host-frames.json', HostFrame],
    ['agent-frames.json', AgentFrame],
  ] as const
  for (const [file, schema] of cases) {
    it(`parses every frame in ${file}`, () => {
      for (const frame of fixture(file)) {
        const parsed = schema.safeParse(frame)
        expect(parsed.success, JSON.stringify(frame)).toBe(true)
      }
    })
  }

  it('decodes every binary output frame in binary-output-frames.json', () => {
    const cases = fixture('binary-output-frames.json') as {
      hex: string
      stream: string
      id: string | null
      offset: number
      dataHex: string
    }[]
    for (const c of cases) {
      const read = decodeOutputFrame(Buffer.from(c.hex, 'hex'))
      expect(read.ok, c.hex).toBe(true)
      if (!read.ok) continue
      expect(read.frame).toMatchObject({ stream: c.stream, id: c.id, offset: c.offset })
      expect(Buffer.from(read.frame.data).toString('hex')).toBe(c.dataHex)
    }
  })
})
