import { describe, expect, it } from 'vitest'
import {
  decodeOutputFrame,
  encodeOutputFrame,
  MAX_OUTPUT_FRAME_ID_BYTES,
  OUTPUT_FRAME_HEADER_BYTES,
} from './output-frame.ts'

describe('binary output frames', () => {
  it('round-trips stream, run id, a 53-bit offset and arbitrary bytes', () => {
    const data = new Uint8Array([0, 255, 13, 10, 0xe2, 0x82])
    const offset = 2 ** 53 - 1
    const read = decodeOutputFrame(encodeOutputFrame('stderr', 'run-€', offset, data))
    expect(read).toEqual({ ok: true, frame: { stream: 'stderr', id: 'run-€', offset, data } })
    const unowned = decodeOutputFrame(encodeOutputFrame('stdout', null, 7, new Uint8Array()))
    expect(unowned).toMatchObject({ ok: true, frame: { stream: 'stdout', id: null, offset: 7 } })
  })

  it('decodes a frame that is a view into a larger buffer', () => {
    const frame = encodeOutputFrame('stdout', 'r1', 5, new Uint8Array([1, 2, 3]))
    const big = new Uint8Array(frame.byteLength + 8)
    big.set(frame, 4)
    const read = decodeOutputFrame(big.subarray(4, 4 + frame.byteLength))
    expect(read).toMatchObject({ ok: true, frame: { id: 'r1', offset: 5, data: new Uint8Array([1, 2, 3]) } })
  })

  it('rejects a truncated header, an unknown kind, an id length past the end or over the cap, and a bad id', () => {
    const good = encodeOutputFrame('stdout', 'r1', 0, new Uint8Array([1]))
    expect(decodeOutputFrame(good.subarray(0, OUTPUT_FRAME_HEADER_BYTES - 1))).toMatchObject({
      ok: false,
      code: 'INVALID_FRAME',
    })
    const kind = good.slice()
    kind[0] = 9
    expect(decodeOutputFrame(kind)).toMatchObject({ ok: false, code: 'UNKNOWN_FRAME_TYPE' })
    const pastEnd = good.slice()
    new DataView(pastEnd.buffer).setUint16(1, 100)
    expect(decodeOutputFrame(pastEnd)).toMatchObject({ ok: false, code: 'INVALID_FRAME' })
    const long = new Uint8Array(OUTPUT_FRAME_HEADER_BYTES + MAX_OUTPUT_FRAME_ID_BYTES + 10).fill(0x61)
    long[0] = 1
    new DataView(long.buffer).setUint16(1, MAX_OUTPUT_FRAME_ID_BYTES + 1)
    new DataView(long.buffer).setUint32(3, 0)
    new DataView(long.buffer).setUint32(7, 0)
    expect(decodeOutputFrame(long)).toMatchObject({ ok: false, code: 'INVALID_FRAME' })
    const badId = encodeOutputFrame('stdout', 'ab', 0, new Uint8Array())
    badId[OUTPUT_FRAME_HEADER_BYTES] = 0xff
    expect(decodeOutputFrame(badId)).toMatchObject({ ok: false, code: 'INVALID_FRAME' })
    const huge = good.slice()
    new DataView(huge.buffer).setUint32(3, 0xffffffff)
    expect(decodeOutputFrame(huge)).toMatchObject({ ok: false, code: 'INVALID_FRAME' })
  })
})
