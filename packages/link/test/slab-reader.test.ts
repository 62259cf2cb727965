// The slab reader: frames decoded in place from reads into reused memory. Reads are simulated
// by copying bytes into `room()` and calling `wrote(n)`, as Node's `onread` does; the attacks
// check that a payload still held is never overwritten while more data arrives, and that a
// hostile length or garbage costs nothing beyond one maximum frame.
import { describe, expect, it } from 'vitest'
import { type DecodeResult, encodeFrame } from '../src/frame-codec.ts'
import { SlabPool } from '../src/slab-pool.ts'
import { SlabReader } from '../src/slab-reader.ts'

/** Feeds `bytes` to `reader` in reads of at most `readSize` (and never more than the room). */
function feed(reader: SlabReader, bytes: Uint8Array, readSize: number): void {
  let at = 0
  while (at < bytes.byteLength) {
    const room = reader.room()
    const n = Math.min(readSize, room.byteLength, bytes.byteLength - at)
    room.set(bytes.subarray(at, at + n))
    reader.wrote(n)
    at += n
  }
}

function collecting(options: ConstructorParameters<typeof SlabReader>[0], maxFrameBytes = 1 << 20) {
  const reader = new SlabReader(options)
  const results: DecodeResult[] = []
  reader.attach((r) => results.push(r), maxFrameBytes)
  return { reader, results }
}

function patterned(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n)
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed) & 0xff
  return out
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.byteLength
  }
  return out
}

describe('slab reader', () => {
  it('decodes frames split at every byte boundary', () => {
    const frames = [
      encodeFrame({ type: 'a' }, patterned(300, 1)),
      encodeFrame({ type: 'b' }),
      encodeFrame({ type: 'c' }, patterned(5, 2)),
    ]
    const all = concat(frames)
    for (let cut = 1; cut < all.byteLength; cut++) {
      const { reader, results } = collecting({ slabBytes: 1024, minReadBytes: 64 })
      feed(reader, all.subarray(0, cut), all.byteLength)
      feed(reader, all.subarray(cut), all.byteLength)
      expect(results.map((r) => r.ok && r.frame.header)).toEqual([
        { type: 'a' },
        { type: 'b' },
        { type: 'c' },
      ])
      const [a, , c] = results
      expect(a?.ok && Buffer.from(a.frame.payload).equals(Buffer.from(patterned(300, 1)))).toBe(true)
      expect(c?.ok && Buffer.from(c.frame.payload).equals(Buffer.from(patterned(5, 2)))).toBe(true)
      expect(reader.bufferedBytes).toBe(0)
    }
  })

  it('decodes a byte at a time, across many slab boundaries', () => {
    const frames = Array.from({ length: 40 }, (_, i) => encodeFrame({ n: i }, patterned(100 + i, i)))
    const { reader, results } = collecting({ slabBytes: 512, minReadBytes: 64 })
    feed(reader, concat(frames), 1)
    expect(results).toHaveLength(40)
    results.forEach((r, i) => {
      expect(r.ok && r.frame.header).toEqual({ n: i })
      expect(r.ok && Buffer.from(r.frame.payload).equals(Buffer.from(patterned(100 + i, i)))).toBe(true)
    })
  })

  it('decodes a frame larger than a slab into one contiguous payload', () => {
    const big = patterned(5000, 9)
    const { reader, results } = collecting({ slabBytes: 1024, minReadBytes: 128 })
    feed(reader, concat([encodeFrame({ type: 'big' }, big), encodeFrame({ type: 'next' })]), 300)
    expect(results.map((r) => r.ok && r.frame.header)).toEqual([{ type: 'big' }, { type: 'next' }])
    expect(results[0]?.ok && Buffer.from(results[0].frame.payload).equals(Buffer.from(big))).toBe(true)
  })

  it('attack: a payload held while more data arrives is never overwritten', () => {
    const pool = new SlabPool(1024, 4)
    const { reader, results } = collecting({ pool, minReadBytes: 64 })
    const held = patterned(600, 3)
    feed(reader, encodeFrame({ type: 'held' }, held), 100)
    const kept = results[0]
    if (!kept?.ok) throw new Error('the first frame did not decode')
    // The consumer keeps the payload and never releases it; the peer floods the link with
    // frames whose consumers release theirs at once, so slabs are reused around the held one.
    for (let i = 0; i < 200; i++) {
      feed(reader, encodeFrame({ n: i }, new Uint8Array(300).fill(0xee)), 170)
      const last = results.at(-1)
      if (last?.ok) last.frame.lease?.release()
    }
    expect(results).toHaveLength(201)
    expect(Buffer.from(kept.frame.payload).equals(Buffer.from(held))).toBe(true)
    // Released slabs were reused (the pool is not just growing).
    expect(pool.size).toBeLessThanOrEqual(4)
  })

  it('attack: payloads released out of order keep every unreleased one intact', () => {
    const pool = new SlabPool(2048, 2)
    const { reader, results } = collecting({ pool, minReadBytes: 128 })
    const payloads = Array.from({ length: 120 }, (_, i) => patterned(200 + (i % 7) * 50, i))
    payloads.forEach((p, i) => {
      feed(reader, encodeFrame({ n: i }, p), 333)
      // Every third payload is kept for good, the others released two frames later.
      const prev = results[i - 2]
      if (i >= 2 && (i - 2) % 3 !== 0 && prev?.ok) prev.frame.lease?.release()
    })
    results.forEach((r, i) => {
      if (i % 3 !== 0) return
      expect(r.ok && Buffer.from(r.frame.payload).equals(Buffer.from(payloads[i]!))).toBe(true)
    })
  })

  it('reads into the same memory again once everything handed out is released', () => {
    const pool = new SlabPool(1024, 1)
    const { reader, results } = collecting({ pool, minReadBytes: 64 })
    const rooms = new Set<ArrayBufferLike>()
    for (let i = 0; i < 100; i++) {
      rooms.add(reader.room().buffer)
      feed(reader, encodeFrame({ n: i }, patterned(150, i)), 1000)
      const r = results.at(-1)
      expect(r?.ok && Buffer.from(r.frame.payload).equals(Buffer.from(patterned(150, i)))).toBe(true)
      if (r?.ok) r.frame.lease?.release()
    }
    expect(rooms.size).toBe(1)
  })

  it("prepends a header into the frame's own bytes, leaving every payload intact", () => {
    const { reader, results } = collecting({ slabBytes: 4096, minReadBytes: 64 })
    const a = patterned(500, 1)
    const b = patterned(700, 2)
    feed(
      reader,
      concat([encodeFrame({ type: 'shell_out', id: 'r-1', offset: 0 }, a), encodeFrame({ n: 2 }, b)]),
      4096,
    )
    const [first, second] = results
    if (!first?.ok || !second?.ok) throw new Error('frames did not decode')
    const header = new Uint8Array([1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0x72, 0x2d, 0x31])
    const message = first.frame.lease?.prepend(header)
    expect(message && Buffer.from(message).equals(Buffer.concat([header, a]))).toBe(true)
    expect(Buffer.from(first.frame.payload).equals(Buffer.from(a))).toBe(true)
    expect(Buffer.from(second.frame.payload).equals(Buffer.from(b))).toBe(true)
    // A header longer than the frame's own bytes before its payload does not fit.
    expect(second.frame.lease?.prepend(new Uint8Array(64))).toBeNull()
    expect(Buffer.from(first.frame.payload).equals(Buffer.from(a))).toBe(true)
    second.frame.lease?.release()
    expect(second.frame.lease?.prepend(new Uint8Array(1))).toBeNull()
  })

  it('swaps a slab a burst filled past half for a fresh one once everything is released', () => {
    const pool = new SlabPool(4096, 2)
    const { reader, results } = collecting({ pool, minReadBytes: 256 })
    const burst = reader.room().buffer
    // One read of many frames fills most of the slab; the consumer keeps them a while.
    feed(reader, concat(Array.from({ length: 10 }, (_, i) => encodeFrame({ n: i }, patterned(300, i)))), 4096)
    expect(results).toHaveLength(10)
    for (const r of results) if (r.ok) r.frame.lease?.release()
    // The next small read completes everything: the burst's slab goes to the pool.
    feed(reader, encodeFrame({ n: 10 }), 4096)
    expect(reader.room().buffer).not.toBe(burst)
    expect(pool.size).toBe(1)
    // An idle link's small frames then stay at the front of its (fresh) slab.
    const idle = reader.room().buffer
    for (let i = 0; i < 50; i++) feed(reader, encodeFrame({ ping: i }), 4096)
    expect(reader.room().buffer).toBe(idle)
    expect(reader.room().byteOffset).toBe(0)
  })

  it('skips a claimed oversize length without holding its bytes, then goes on', () => {
    const { reader, results } = collecting({ slabBytes: 1024, minReadBytes: 64 }, 256)
    const big = encodeFrame({ type: 'big' }, new Uint8Array(100_000).fill(7))
    feed(reader, concat([big, encodeFrame({ type: 'next' }, patterned(10, 1))]), 500)
    expect(results.map((r) => (r.ok ? r.frame.header : r.error.code))).toEqual([
      'FRAME_TOO_LARGE',
      { type: 'next' },
    ])
    expect(reader.bufferedBytes).toBe(0)
    // The skipped bytes never grew the slab: the room offered stays one slab.
    expect(reader.room().buffer.byteLength).toBe(1024)
  })

  it('reports a 4 GiB claim at once, without waiting for its bytes', () => {
    const { reader, results } = collecting({ slabBytes: 1024, minReadBytes: 64 })
    feed(reader, new Uint8Array([0xff, 0xff, 0xff, 0xff, 1, 2, 3]), 100)
    expect(results.map((r) => !r.ok && r.error.code)).toEqual(['FRAME_TOO_LARGE'])
  })

  it('never throws on random garbage and stays bounded', () => {
    const { reader, results } = collecting({ slabBytes: 4096, minReadBytes: 256 }, 2048)
    let seed = 11
    const garbage = new Uint8Array(200_000)
    for (let i = 0; i < garbage.length; i++) {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      garbage[i] = seed & 0xff
    }
    expect(() => feed(reader, garbage, 777)).not.toThrow()
    expect(results.length).toBeGreaterThan(0)
    expect(reader.bufferedBytes).toBeLessThanOrEqual(2048 + 4)
    expect(reader.room().buffer.byteLength).toBeLessThanOrEqual(2048 + 4 + 256 + 4096)
  })

  it('keeps reads undecoded until a sink attaches, then hands them over in order', () => {
    const reader = new SlabReader({ slabBytes: 1024, minReadBytes: 64 })
    feed(reader, concat([encodeFrame({ n: 1 }), encodeFrame({ n: 2 }, patterned(30, 2))]), 1000)
    expect(reader.attached).toBe(false)
    const results: DecodeResult[] = []
    reader.attach((r) => results.push(r), 1 << 20)
    expect(results.map((r) => r.ok && r.frame.header)).toEqual([{ n: 1 }, { n: 2 }])
  })
})
