import { Writable } from 'node:stream'
import { encodeFrame, FrameDecoder } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { encodeFrameHead, writeFrame } from './frame-writer.ts'

/** A socket stand-in that records what reaches the kernel, one entry per write or writev. */
function recordingSocket(): { socket: Writable & { destroyed: boolean }; writes: Buffer[][] } {
  const writes: Buffer[][] = []
  const socket = new Writable({
    write(chunk: Buffer, _enc, cb) {
      writes.push([chunk])
      cb()
    },
    writev(chunks, cb) {
      writes.push(chunks.map((c) => c.chunk as Buffer))
      cb()
    },
  })
  return { socket, writes }
}

describe('frame writer', () => {
  it('writes the bytes encodeFrame produces, for headers with and without a payload', () => {
    const headers = [
      { t: 'result', id: 7, result: { stdout: '', exitCode: 0 } },
      { t: 'data', ch: 3, stream: 'stderr', run: 'r-ü-😀', offset: 12 },
      { t: 'fail', id: 1, error: { code: 'BAD_REQUEST', message: 'lone \ud800 surrogate' } },
    ]
    const payloads = [undefined, new Uint8Array(0), new Uint8Array([0, 255, 10, 0x1f])]
    for (const header of headers) {
      for (const payload of payloads) {
        const { socket, writes } = recordingSocket()
        writeFrame(socket as never, header, payload)
        expect(Buffer.concat(writes.flat())).toEqual(Buffer.from(encodeFrame(header, payload)))
      }
    }
  })

  it('sends a payload in the same writev as its header, without copying it', () => {
    const { socket, writes } = recordingSocket()
    const payload = Buffer.alloc(65_536, 1)
    expect(writeFrame(socket as never, { t: 'data', ch: 1 }, payload)).toBe(true)
    expect(writes).toHaveLength(1)
    expect(writes[0]?.[1]).toBe(payload)
  })

  it('encodes the length prefix to cover header and payload', () => {
    const head = encodeFrameHead({ t: 'x' }, 10)
    const headerBytes = Buffer.byteLength('{"t":"x"}')
    expect(head.readUInt32BE(0)).toBe(4 + headerBytes + 10)
    expect(head.readUInt32BE(4)).toBe(headerBytes)
  })

  it('reports false once the socket is destroyed', () => {
    const { socket } = recordingSocket()
    socket.destroy()
    expect(writeFrame(socket as never, { t: 'ping', n: 1 })).toBe(false)
  })

  it('round-trips through the protocol decoder however the stream is cut into chunks', () => {
    let seed = 11
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed % n
    }
    const frames = Array.from({ length: 40 }, (_, i) => ({
      header: { t: 'data', ch: i, run: i % 3 === 0 ? null : `r${i}` },
      payload: Uint8Array.from({ length: rand(3) === 0 ? 300 : rand(40) }, () => rand(256)),
    }))
    const { socket, writes } = recordingSocket()
    for (const f of frames) writeFrame(socket as never, f.header, f.payload)
    const stream = Buffer.concat(writes.flat())
    const expected = frames.map((f) =>
      f.payload.byteLength > 256
        ? { ok: false, code: 'FRAME_TOO_LARGE' }
        : { ok: true, header: f.header, payload: Buffer.from(f.payload) },
    )
    for (let trial = 0; trial < 50; trial++) {
      const decoder = new FrameDecoder(256)
      const got = []
      for (let at = 0; at < stream.length; ) {
        const size = trial === 0 ? 1 : 1 + rand(trial < 25 ? 64 : 2048)
        for (const r of decoder.push(stream.subarray(at, at + size))) {
          got.push(
            r.ok
              ? { ok: true, header: r.frame.header, payload: Buffer.from(r.frame.payload) }
              : { ok: false, code: r.error.code },
          )
        }
        at += size
      }
      expect(got).toEqual(expected)
      expect(decoder.bufferedBytes).toBe(0)
    }
  })
})
