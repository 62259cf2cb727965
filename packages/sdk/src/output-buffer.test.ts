import { describe, expect, it } from 'vitest'
import { OutputBuffer, utf8Boundary } from './output-buffer.ts'

const bytes = (s: string) => new TextEncoder().encode(s)

describe('OutputBuffer', () => {
  it('keeps every byte under the cap, in order, across chunks', () => {
    const buf = new OutputBuffer(100)
    buf.push(bytes('ab'))
    buf.push(bytes('€'))
    expect(new TextDecoder().decode(buf.bytes(true))).toBe('ab€')
    expect(buf).toMatchObject({ totalBytes: 5, truncated: false })
  })

  it('cuts text on a character boundary and still counts every byte', () => {
    const buf = new OutputBuffer(4)
    buf.push(bytes('ab€x')) // 61 62 e2 82 ac 78
    expect([...buf.bytes(true)]).toEqual([0x61, 0x62])
    expect([...buf.bytes(false)]).toEqual([0x61, 0x62, 0xe2, 0x82])
    expect(buf).toMatchObject({ totalBytes: 6, truncated: true })
  })
})

describe('utf8Boundary', () => {
  it('keeps complete sequences of every length', () => {
    for (const s of ['a', 'é', '€', '😀']) expect(utf8Boundary(bytes(s))).toBe(bytes(s).length)
  })

  it('drops an incomplete trailing sequence', () => {
    const emoji = bytes('a😀')
    for (let cut = 2; cut < emoji.length; cut++) expect(utf8Boundary(emoji.subarray(0, cut))).toBe(1)
  })

  it('leaves invalid bytes alone', () => {
    expect(utf8Boundary(new Uint8Array([0x61, 0xff]))).toBe(2)
    expect(utf8Boundary(new Uint8Array([0x80, 0x80, 0x80, 0x80, 0x80]))).toBe(5)
  })
})
