import { describe, expect, it } from 'vitest'
import { RunQueue } from './run-queue.ts'

describe('RunQueue', () => {
  it('takes items in the order they were pushed, across compactions of the head', () => {
    const q = new RunQueue<number>()
    const taken: number[] = []
    // Enough items to pass the compaction threshold several times, with pushes interleaved.
    for (let i = 0; i < 5000; i++) {
      q.push(i)
      if (i % 3 === 0) taken.push(q.take()!)
    }
    for (let item = q.take(); item !== undefined; item = q.take()) taken.push(item)
    expect(taken).toEqual(Array.from({ length: 5000 }, (_, i) => i))
    expect(q.size).toBe(0)
  })

  it('counts what waits and returns undefined when empty', () => {
    const q = new RunQueue<string>()
    expect(q.take()).toBeUndefined()
    q.push('a')
    q.push('b')
    expect(q.size).toBe(2)
    expect(q.take()).toBe('a')
    expect(q.size).toBe(1)
    expect(q.take()).toBe('b')
    expect(q.take()).toBeUndefined()
    expect(q.size).toBe(0)
  })

  it('puts items back at the head in their order, after some were taken', () => {
    const q = new RunQueue<number>()
    for (let i = 0; i < 2000; i++) q.push(i)
    for (let i = 0; i < 1500; i++) q.take()
    q.pushFront([-2, -1])
    expect(q.peek()).toBe(-2)
    const rest: number[] = []
    for (let item = q.take(); item !== undefined; item = q.take()) rest.push(item)
    expect(rest).toEqual([-2, -1, ...Array.from({ length: 500 }, (_, i) => 1500 + i)])
  })
})
