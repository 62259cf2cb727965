import { describe, expect, it } from 'vitest'
import { OutputDecoder } from './output-decoder.ts'

describe('OutputDecoder', () => {
  it('joins a multi-byte character split across chunks', () => {
    const d = new OutputDecoder('utf8')
    const bytes = Buffer.from('é€😀', 'utf8')
    let out = ''
    for (const b of bytes) out += d.decode('stdout', Uint8Array.of(b))
    expect(out).toBe('é€😀')
  })

  it('keeps stdout and stderr partial characters apart', () => {
    const d = new OutputDecoder('utf8')
    const e = Buffer.from('é', 'utf8')
    expect(d.decode('stdout', e.subarray(0, 1))).toBe('')
    expect(d.decode('stderr', Buffer.from('x'))).toBe('x')
    expect(d.decode('stdout', e.subarray(1))).toBe('é')
  })

  it('emits base64 losslessly and flushes nothing', () => {
    const d = new OutputDecoder('base64')
    expect(d.decode('stdout', Uint8Array.of(0, 255, 10))).toBe('AP8K')
    expect(d.flush('stdout')).toBe('')
  })

  it('flushes an incomplete character as a replacement character', () => {
    const d = new OutputDecoder('utf8')
    d.decode('stdout', Uint8Array.of(0xe2, 0x82))
    expect(d.flush('stdout')).toBe('\uFFFD')
  })
})
