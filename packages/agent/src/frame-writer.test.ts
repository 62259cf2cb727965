import { Writable } from 'node:stream'
import { encodeFrame } from '@conch/protocol'
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
})
