import { describe, expect, it } from 'vitest'
import { decodeBody, encodeFrame, encodeFrameHead, FrameDecoder } from '../src/frame-codec.ts'

const bytes = (s: string) => new TextEncoder().encode(s)

describe('frame codec', () => {
  it('round-trips a header and a binary payload', () => {
    const payload = new Uint8Array([0, 255, 10, 13, 0xc3])
    const [r] = new FrameDecoder().push(encodeFrame({ type: 'data', ch: 1 }, payload))
    expect(r).toEqual({ ok: true, frame: { header: { type: 'data', ch: 1 }, payload } })
  })

  it('sizes a head exactly for any string a peer or a command can put in a header', () => {
    // Multi-byte, astral, lone surrogates (escaped by JSON.stringify), NUL, quotes and escapes.
    const strings = ['', 'ascii', 'é', '€', '𝄞', '\ud800', 'a\udc00b', '\u0000', '"\\\n', 'é'.repeat(3000)]
    for (const text of strings) {
      const header = { type: 'shell_start', id: text, n: [text, { [text]: text }] }
      const head = encodeFrameHead(header, 5)
      const json = Buffer.from(JSON.stringify(header))
      expect(head.readUInt32BE(4)).toBe(json.length)
      expect(head.readUInt32BE(0)).toBe(4 + json.length + 5)
      expect(head.byteLength).toBe(8 + json.length)
      const [r] = new FrameDecoder().push(new Uint8Array([...head, 1, 2, 3, 4, 5]))
      expect(r).toEqual({ ok: true, frame: { header, payload: new Uint8Array([1, 2, 3, 4, 5]) } })
    }
  })

  it('refuses a header that is not UTF-8, read in place from a Buffer or from a view, and keeps a real U+FFFD', () => {
    /** A frame body (header length, header bytes, payload) at offset 3 of a larger buffer. */
    const body = (header: number[]) => {
      const out = Buffer.alloc(3 + 4 + header.length + 2, 0x20)
      out.writeUInt32BE(header.length, 3)
      out.set(header, 7)
      return out
    }
    const quoted = (inner: number[]) => [...bytes('{"type":"x","id":"'), ...inner, ...bytes('"}')]
    const invalid = [
      [0x80],
      [0xc3],
      [0xc0, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xe2, 0x82],
      [0xff],
    ]
    for (const inner of invalid) {
      const buffer = body(quoted(inner))
      for (const input of [buffer, new Uint8Array(buffer)]) {
        const r = decodeBody(input, 3, input.byteLength)
        expect(r.ok ? r.frame : r.error.code).toBe('INVALID_FRAME')
      }
    }
    const replacement = body(quoted([0xef, 0xbf, 0xbd]))
    for (const input of [replacement, new Uint8Array(replacement)]) {
      const r = decodeBody(input, 3, input.byteLength)
      expect(r.ok && r.frame.header).toEqual({ type: 'x', id: '\ufffd' })
      expect(r.ok && r.frame.payload.byteLength).toBe(2)
    }
  })

  it('reads headers with the reader it is given and answers its throw with INVALID_FRAME', () => {
    const seen: string[] = []
    const reader = (text: string) => {
      seen.push(text)
      if (text.includes('bad')) throw new SyntaxError('no')
      return { read: text.length }
    }
    const frames = new FrameDecoder(1024, reader).push(
      new Uint8Array([...encodeFrame({ type: 'a' }), ...encodeFrame({ type: 'bad' })]),
    )
    expect(seen).toEqual(['{"type":"a"}', '{"type":"bad"}'])
    expect(frames[0]).toEqual({ ok: true, frame: { header: { read: 12 }, payload: new Uint8Array(0) } })
    expect(frames[1]).toMatchObject({ ok: false, error: { code: 'INVALID_FRAME' } })
  })

  it('reassembles frames split at every byte boundary', () => {
    const a = encodeFrame({ type: 'a' }, bytes('hello'))
    const b = encodeFrame({ type: 'b' })
    const all = new Uint8Array([...a, ...b])
    const decoder = new FrameDecoder()
    const out = []
    for (const byte of all) out.push(...decoder.push(new Uint8Array([byte])))
    expect(out.map((r) => r.ok && r.frame.header)).toEqual([{ type: 'a' }, { type: 'b' }])
    expect(decoder.bufferedBytes).toBe(0)
  })

  it('decodes many frames from one chunk', () => {
    const all = new Uint8Array([...encodeFrame({ n: 1 }), ...encodeFrame({ n: 2 }), ...encodeFrame({ n: 3 })])
    expect(new FrameDecoder().push(all).map((r) => r.ok && r.frame.header)).toEqual([
      { n: 1 },
      { n: 2 },
      { n: 3 },
    ])
  })

  it('skips an oversized frame exactly and keeps decoding', () => {
    const decoder = new FrameDecoder(64)
    const big = encodeFrame({ type: 'big' }, new Uint8Array(1000))
    const next = encodeFrame({ type: 'next' })
    const results = [
      ...decoder.push(big.subarray(0, 10)),
      ...decoder.push(big.subarray(10)),
      ...decoder.push(next),
    ]
    expect(results[0]).toMatchObject({ ok: false, error: { code: 'FRAME_TOO_LARGE' } })
    expect(results[1]).toMatchObject({ ok: true, frame: { header: { type: 'next' } } })
  })

  it('reports a header that is not JSON and keeps decoding', () => {
    const bad = new Uint8Array([0, 0, 0, 7, 0, 0, 0, 3, 0x7b, 0x7b, 0x7b])
    const results = new FrameDecoder().push(new Uint8Array([...bad, ...encodeFrame({ ok: 1 })]))
    expect(results[0]).toMatchObject({ ok: false, error: { code: 'INVALID_FRAME' } })
    expect(results[1]).toMatchObject({ ok: true, frame: { header: { ok: 1 } } })
  })

  it('reports a header length larger than the frame', () => {
    const bad = new Uint8Array([0, 0, 0, 5, 0, 0, 0, 99, 0x7b])
    expect(new FrameDecoder().push(bad)[0]).toMatchObject({ ok: false, error: { code: 'INVALID_FRAME' } })
  })

  it('never throws on random bytes', () => {
    const decoder = new FrameDecoder(4096)
    let seed = 7
    const rand = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed
    }
    for (let i = 0; i < 500; i++) {
      const chunk = new Uint8Array(rand() % 64)
      for (let j = 0; j < chunk.length; j++) chunk[j] = rand() & 0xff
      expect(() => decoder.push(chunk)).not.toThrow()
    }
  })
})
