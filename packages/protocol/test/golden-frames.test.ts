import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { AgentFrame, ClientFrame, HostFrame, ServerFrame } from '../src/index.ts'

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
})
