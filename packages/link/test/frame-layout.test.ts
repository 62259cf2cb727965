// How the endpoint lays frames onto the stream: the bytes of `encodeFrame`, a payload as its
// own chunk of the header's writev, control frames of one tick in one writev.
import { Duplex } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { encodeFrame, encodeFrameHead, FrameDecoder } from '../src/frame-codec.ts'
import { LinkEndpoint, type LinkFrame } from '../src/link-endpoint.ts'

/** A stream that records what would reach the kernel, one entry per write or writev. */
function recordingSocket(): { socket: Duplex; writes: Buffer[][] } {
  const writes: Buffer[][] = []
  const socket = new Duplex({
    read() {},
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

/** An endpoint on `socket` that only writes, as the roles' endpoints do. */
function endpointOn(socket: Duplex): LinkEndpoint<LinkFrame, LinkFrame> {
  return new LinkEndpoint<LinkFrame, LinkFrame>(socket, {
    parse: () => ({ ok: false, error: { code: 'INVALID_FRAME', message: 'not read' } }),
    onFrame: () => {},
    onBadFrame: () => {},
  })
}

/** Writes one frame through a new endpoint on `socket`. */
function writeFrame(socket: Duplex, header: unknown, payload?: Uint8Array): boolean {
  return endpointOn(socket).send(header as LinkFrame, payload)
}

/** Lets the endpoint's end-of-tick flush happen. */
const nextTick = (): Promise<void> => new Promise((r) => process.nextTick(r))

describe('frame layout on the stream', () => {
  it('writes the bytes encodeFrame produces, for headers with and without a payload', async () => {
    const headers = [
      { type: 'result', id: 7, result: { stdout: '', exitCode: 0 } },
      { type: 'data', ch: 3, stream: 'stderr', run: 'r-ü-😀', offset: 12 },
      { type: 'fail', id: 1, error: { code: 'BAD_REQUEST', message: 'lone \ud800 surrogate' } },
    ]
    const payloads = [undefined, new Uint8Array(0), new Uint8Array([0, 255, 10, 0x1f])]
    for (const header of headers) {
      for (const payload of payloads) {
        const { socket, writes } = recordingSocket()
        writeFrame(socket, header, payload)
        await nextTick()
        expect(Buffer.concat(writes.flat())).toEqual(Buffer.from(encodeFrame(header, payload)))
      }
    }
  })

  it('sends a payload in the same writev as its header, without copying it', () => {
    const { socket, writes } = recordingSocket()
    const payload = Buffer.alloc(65_536, 1)
    expect(writeFrame(socket, { type: 'data', ch: 1 }, payload)).toBe(true)
    expect(writes).toHaveLength(1)
    expect(writes[0]?.[1]).toBe(payload)
  })

  it('encodes the length prefix to cover header and payload', () => {
    const head = encodeFrameHead({ type: 'x' }, 10)
    const headerBytes = Buffer.byteLength('{"type":"x"}')
    expect(head.readUInt32BE(0)).toBe(4 + headerBytes + 10)
    expect(head.readUInt32BE(4)).toBe(headerBytes)
  })

  it('sends the control frames of one tick in one writev', async () => {
    const { socket, writes } = recordingSocket()
    const endpoint = endpointOn(socket)
    for (let n = 0; n < 20; n++) endpoint.send({ type: 'ping', n } as LinkFrame)
    expect(writes).toHaveLength(0)
    await nextTick()
    expect(writes).toHaveLength(1)
    expect(writes[0]).toHaveLength(20)
  })

  it('reports false once the socket is destroyed', () => {
    const { socket } = recordingSocket()
    socket.destroy()
    expect(writeFrame(socket, { type: 'ping', n: 1 })).toBe(false)
  })

  it('round-trips through the decoder however the stream is cut into chunks', async () => {
    let seed = 11
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed % n
    }
    const frames = Array.from({ length: 40 }, (_, i) => ({
      header: { type: 'data', ch: i, run: i % 3 === 0 ? null : `r${i}` },
      payload: Uint8Array.from({ length: rand(3) === 0 ? 300 : rand(40) }, () => rand(256)),
    }))
    const { socket, writes } = recordingSocket()
    const endpoint = endpointOn(socket)
    for (const f of frames) endpoint.send(f.header as LinkFrame, f.payload)
    await nextTick()
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
