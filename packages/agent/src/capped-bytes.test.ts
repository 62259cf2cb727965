import { describe, expect, it } from 'vitest'
import { CappedBytes, utf8Boundary } from './capped-bytes.ts'

describe('CappedBytes', () => {
  it('keeps everything under the cap', () => {
    const c = new CappedBytes(10)
    c.append(Buffer.from('abc'))
    c.append(Buffer.from('def'))
    expect(c.bytes().toString()).toBe('abcdef')
    expect(c.truncated).toBe(false)
    expect(c.totalBytes).toBe(6)
  })

  it('cuts on a character boundary and counts every byte', () => {
    const c = new CappedBytes(5)
    c.append(Buffer.from('abcd€z')) // € is 3 bytes: the cap falls inside it
    expect(c.bytes().toString()).toBe('abcd')
    expect(c.truncated).toBe(true)
    expect(c.totalBytes).toBe(8)
  })

  it('finds the boundary before an incomplete 4-byte sequence', () => {
    const smile = Buffer.from('😀')
    expect(utf8Boundary(Buffer.concat([Buffer.from('a'), smile.subarray(0, 3)]))).toBe(1)
    expect(utf8Boundary(Buffer.concat([Buffer.from('a'), smile]))).toBe(5)
  })
})
