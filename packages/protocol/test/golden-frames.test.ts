import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  AGENT_FRAME_TYPES,
  AGENT_METHODS,
  AgentFrame,
  ClientFrame,
  decodeOutputFrame,
  HOST_FRAME_TYPES,
  HostFrame,
  isLinkHello,
  LINK_VERSION,
  linkVersionOf,
  ServerFrame,
} from '../src/index.ts'

// Golden frames are what deployed peers send today. They must keep parsing as the protocol grows.
// The `*-link-v1.json` ones are what agents and runners of link 1 sent (discriminated on `t`):
// no longer spoken, but a runner must still recognise an agent of link 1 by its hello.
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

  const link = [
    ['host-frames.json', HostFrame, HOST_FRAME_TYPES],
    ['agent-frames.json', AgentFrame, AGENT_FRAME_TYPES],
  ] as const
  for (const [file, schema, types] of link) {
    it(`has a frame of every link type in ${file}, and parsing keeps every field`, () => {
      const frames = fixture(file) as { type: string }[]
      expect(new Set(frames.map((f) => f.type))).toEqual(new Set(types))
      // Equality catches a field the schema drops (an error's details that no longer match).
      for (const frame of frames) expect(schema.parse(frame), JSON.stringify(frame)).toEqual(frame)
    })

    it(`names link ${LINK_VERSION} in the hello of ${file}`, () => {
      const hellos = fixture(file).filter(isLinkHello)
      expect(hellos).toHaveLength(1)
      expect(linkVersionOf(hellos[0])).toBe(LINK_VERSION)
    })
  }

  it('has call params that parse against their method', () => {
    const calls = (fixture('host-frames.json') as { type: string; method: string; params: unknown }[]).filter(
      (f) => f.type === 'call',
    )
    for (const call of calls) {
      const method = AGENT_METHODS[call.method as keyof typeof AGENT_METHODS]
      expect(method.params.safeParse(call.params).success, JSON.stringify(call)).toBe(true)
    }
  })

  for (const [file, schema] of [
    ['host-frames-link-v1.json', HostFrame],
    ['agent-frames-link-v1.json', AgentFrame],
  ] as const) {
    it(`classifies every frame in ${file} as link 1, which no longer parses`, () => {
      for (const frame of fixture(file)) {
        expect(linkVersionOf(frame), JSON.stringify(frame)).toBe(1)
        expect(schema.safeParse(frame).success, JSON.stringify(frame)).toBe(false)
      }
      expect(fixture(file).filter(isLinkHello)).toHaveLength(1)
    })
  }

  it('classifies no garbage as a link version', () => {
    const garbage: unknown[] = [
      null,
      42,
      'hello',
      [{ t: 'hello' }],
      {},
      { t: 'teleport' },
      { t: 1 },
      { t: 'hello', type: 'hello' },
      { type: 'hello' },
      { type: 'hello', linkVersion: 0 },
      { type: 'hello', linkVersion: -2 },
      { type: 'hello', linkVersion: 2.5 },
      { type: 'hello', linkVersion: '2' },
      { type: 'shell_out', linkVersion: 2 },
    ]
    for (const header of garbage) expect(linkVersionOf(header), JSON.stringify(header)).toBeNull()
  })

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
