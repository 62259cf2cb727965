import { spawn } from 'node:child_process'
import { describe, expect, test } from 'vitest'
import { COPY_BELOW_BYTES, readPipeIntoPool } from './pooled-pipe-reads.ts'
import { leaseOf, READ_BUFFER_BYTES, ReadBufferPool } from './read-buffer-pool.ts'

describe('read buffer leases', () => {
  test('a lent buffer returns to the pool only when its last holder releases it', () => {
    const pool = new ReadBufferPool(2)
    const lease = pool.take()
    expect(leaseOf(lease.bytes.subarray(10, 20))).toBe(lease)
    expect(leaseOf(Buffer.alloc(10))).toBeUndefined()
    lease.acquire()
    lease.acquire()
    lease.lend()
    expect(pool.size).toBe(0)
    lease.release()
    expect(pool.size).toBe(0)
    lease.release()
    expect(pool.size).toBe(1)
    expect(pool.take()).toBe(lease)
  })

  test('a buffer the reader still holds is not pooled when its holders let go', () => {
    const pool = new ReadBufferPool(2)
    const lease = pool.take()
    lease.acquire()
    lease.release()
    expect(pool.size).toBe(0)
    lease.lend()
    expect(pool.size).toBe(1)
  })

  test('keeps at most its bound of free buffers', () => {
    const pool = new ReadBufferPool(1)
    const a = pool.take()
    const b = pool.take()
    a.lend()
    b.lend()
    expect(pool.size).toBe(1)
  })
})

describe('pooled pipe reads', () => {
  test('a view kept under its lease is never read into while more reads arrive', async () => {
    const pool = new ReadBufferPool(4)
    // Counting lines: each position of the stream holds different bytes.
    const child = spawn('seq', ['1', '400000'], { stdio: ['ignore', 'pipe', 'ignore'] })
    const kept: { view: Buffer; copy: Buffer }[] = []
    const all: Buffer[] = []
    const ok = readPipeIntoPool(child.stdout, pool, (bytes) => {
      all.push(Buffer.from(bytes))
      const lease = leaseOf(bytes)
      if (bytes.length < COPY_BELOW_BYTES) expect(lease).toBeUndefined()
      else {
        expect(lease).toBeDefined()
        // Every other pooled read is kept (and never released); the rest go back at once.
        if (kept.length % 2 === 0) lease!.acquire()
        kept.push({ view: bytes, copy: Buffer.from(bytes) })
      }
    })
    expect(ok).toBe(true)
    await new Promise((resolve) => child.stdout.on('end', resolve))
    const expected = Array.from({ length: 400000 }, (_, i) => `${i + 1}\n`).join('')
    expect(Buffer.concat(all).toString()).toBe(expected)
    expect(kept.length).toBeGreaterThan(4)
    for (let i = 0; i < kept.length; i += 2) expect(kept[i]!.view.equals(kept[i]!.copy)).toBe(true)
    for (const { view } of kept) expect(view.length).toBeLessThanOrEqual(READ_BUFFER_BYTES)
  })
})
