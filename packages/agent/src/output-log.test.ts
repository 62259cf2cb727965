import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it, vi } from 'vitest'
import {
  DATA_RECORD_OVERHEAD_BYTES,
  EVENT_RECORD_OVERHEAD_BYTES,
  isOutput,
  type LogEvent,
  recordBytes,
} from './log-records.ts'
import { OutputLog } from './output-log.ts'
import { ScrollbackBudget } from './scrollback-budget.ts'

/** A forced full GC, without starting the test process with `--expose-gc`. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc')
  ;(runInNewContext('gc') as () => void)()
}

/** A buffer with its own ArrayBuffer, as a pipe read gives one (not a slice of Node's pool). */
function pipeChunk(text: string): Buffer {
  const bytes = new Uint8Array(Buffer.byteLength(text))
  bytes.set(Buffer.from(text))
  return Buffer.from(bytes.buffer)
}

/** A weak reference made outside the caller's frame, so no register of it keeps the target. */
function watch(event: LogEvent): WeakRef<LogEvent> {
  return new WeakRef(event)
}

/** The sum of what every held record counts for, from a full replay. */
function countedBytes(log: OutputLog): number {
  return log.readFrom(log.startOffset).reduce((sum, e) => sum + recordBytes(e), 0)
}

describe('the scrollback bound counts every record', () => {
  it('keeps a log of silent runs (zero-length records only) within its byte bound', () => {
    const log = new OutputLog(64 * 1024)
    for (let i = 0; i < 100_000; i++) {
      log.appendRunStart(`run-${i}`)
      log.appendRunExit({ id: `run-${i}`, code: 0, timedOut: false, durationMs: 1.5 })
    }
    expect(log.heldBytes).toBeLessThanOrEqual(64 * 1024)
    expect(log.heldRecords).toBeLessThanOrEqual((64 * 1024) / EVENT_RECORD_OVERHEAD_BYTES)
    expect(log.heldRecords).toBeGreaterThan(0)
    expect(countedBytes(log)).toBe(log.heldBytes)
  })

  it('counts zero-length data records at their overhead', () => {
    const log = new OutputLog(64 * 1024)
    for (let i = 0; i < 100_000; i++) log.appendData('stdout', null, Buffer.alloc(0))
    expect(log.heldBytes).toBeLessThanOrEqual(64 * 1024)
    expect(log.heldRecords).toBeLessThanOrEqual((64 * 1024) / DATA_RECORD_OVERHEAD_BYTES)
  })

  it('counts each tiny data record at its overhead plus its bytes and run id', () => {
    const log = new OutputLog(1 << 20)
    for (let i = 0; i < 50_000; i++) {
      log.appendRunStart(`r${i}`)
      log.appendData('stdout', `r${i}`, pipeChunk('hello world\n'))
      log.appendRunExit({ id: `r${i}`, code: 0, timedOut: false, durationMs: 2 })
    }
    const perRun = DATA_RECORD_OVERHEAD_BYTES + 2 * EVENT_RECORD_OVERHEAD_BYTES + 12
    expect(log.heldBytes).toBeLessThanOrEqual(1 << 20)
    expect(log.heldRecords).toBeLessThanOrEqual(((1 << 20) / perRun) * 3)
    expect(countedBytes(log)).toBe(log.heldBytes)
  })

  it('still replays exactly what it holds after evicting most of a long history', () => {
    const log = new OutputLog(8 * 1024)
    for (let i = 0; i < 10_000; i++) {
      log.appendRunStart(`r${i}`)
      log.appendData('stdout', `r${i}`, Buffer.from(`${i}\n`))
      log.appendRunExit({ id: `r${i}`, code: i % 256, timedOut: false, durationMs: 1 })
    }
    const replay = log.readFrom(log.startOffset)
    expect(replay.length).toBe(log.heldRecords)
    const last = replay.at(-1)
    expect(last).toMatchObject({ type: 'shell_exit', id: 'r9999', code: 9999 % 256 })
    const text = replay.flatMap((e) => ('data' in e ? [e.data.toString()] : [])).join('')
    expect(text.endsWith('9998\n9999\n')).toBe(true)
    expect(() => log.readFrom(log.startOffset - 1)).toThrow(/evicted/)
  })
})

describe('eviction frees memory', () => {
  it('lets an evicted record be collected at once', async () => {
    const log = new OutputLog(4 * 1024)
    const first = watch(log.appendData('stdout', 'r0', pipeChunk('x'.repeat(100)))!)
    // A few more records than the bound holds: enough to evict the first, too few to make the
    // log copy its backing array.
    for (let i = 1; i < 20; i++) log.appendData('stdout', `r${i}`, pipeChunk('y'.repeat(100)))
    expect(log.startOffset).toBeGreaterThan(0)
    // A WeakRef keeps its target until the job that made it ends.
    await new Promise((resolve) => setImmediate(resolve))
    collectGarbage()
    expect(first.deref()).toBeUndefined()
  })

  it('keeps its JavaScript heap within a fixed bound of its byte bound, however many runs pass', () => {
    const bound = 1 << 20
    const log = new OutputLog(bound)
    const run = (i: number): void => {
      log.appendRunStart(`r${i}`)
      log.appendData('stdout', `r${i}`, pipeChunk('hello world\n'))
      log.appendRunExit({ id: `r${i}`, code: 0, timedOut: false, durationMs: performance.now() })
    }
    collectGarbage()
    const before = process.memoryUsage()
    for (let i = 0; i < 200_000; i++) run(i)
    collectGarbage()
    const after = process.memoryUsage()
    const grew = after.heapUsed + after.arrayBuffers - (before.heapUsed + before.arrayBuffers)
    expect(log.heldBytes).toBeLessThanOrEqual(bound)
    expect(grew).toBeLessThan(2 * bound)
  })
})

describe('a coalescing log', () => {
  /** `n` bytes of `c`, as one pty or pipe read. */
  const read = (c: string, n = 4096): Buffer => pipeChunk(c.repeat(n))

  /** Every data byte a replay from `offset` holds, and whether each record starts where the last ended. */
  function replayed(log: OutputLog, offset: number): { text: string; offsetsExact: boolean } {
    let at = offset
    let text = ''
    let offsetsExact = true
    for (const e of log.readFrom(offset)) {
      if (!isOutput(e)) continue
      if (e.offset !== at) offsetsExact = false
      at = e.offset + e.data.length
      text += e.data.toString()
    }
    return { text, offsetsExact }
  }

  it('gathers full reads of one stream and run into one record of one frame, with exact offsets', () => {
    const log = new OutputLog(1 << 20, () => {}, undefined, true)
    const seen: LogEvent[] = []
    log.subscribe(0, (e) => {
      seen.push(e)
      return true
    })
    for (let i = 0; i < 15; i++) log.appendData('stdout', null, read(String(i % 10)))
    expect(log.endOffset).toBe(15 * 4096)
    expect(seen).toEqual([])
    log.appendData('stdout', null, read('f'))
    expect(seen).toHaveLength(1)
    expect(seen[0]).toMatchObject({ type: 'shell_out', offset: 0, id: null })
    expect((seen[0] as { data: Buffer }).data.length).toBe(65_536)
    expect(log.heldRecords).toBe(1)
    const written =
      Array.from({ length: 15 }, (_, i) => String(i % 10).repeat(4096)).join('') + 'f'.repeat(4096)
    expect(replayed(log, 4095)).toEqual({ text: written.slice(4095), offsetsExact: true })
  })

  it('never builds a record larger than one agent data frame', () => {
    const log = new OutputLog(8 << 20, () => {}, undefined, true)
    for (let i = 0; i < 100; i++) log.appendData('stdout', null, read('x', 4095))
    log.flush()
    const sizes = log.readFrom(0).flatMap((e) => (isOutput(e) ? [e.data.length] : []))
    expect(Math.max(...sizes)).toBeLessThanOrEqual(65_536)
    expect(sizes.length).toBeLessThan(100)
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(100 * 4095)
  })

  it('records a short read at once, with what was gathered before it (an echo is never held)', () => {
    const log = new OutputLog(1 << 20, () => {}, undefined, true)
    const seen: string[] = []
    log.subscribe(0, (e) => {
      if (isOutput(e)) seen.push(`${e.offset}:${e.data.length}`)
      return true
    })
    log.appendData('stdout', null, pipeChunk('k'))
    expect(seen).toEqual(['0:1'])
    log.appendData('stdout', null, read('a', 2000))
    log.appendData('stdout', null, read('b', 2000))
    log.appendData('stdout', null, pipeChunk('$ '))
    expect(seen).toEqual(['0:1', '1:4002'])
  })

  it('records what it gathered once the wait is over, without another read', async () => {
    const log = new OutputLog(1 << 20, () => {}, undefined, true)
    const seen: number[] = []
    log.subscribe(0, (e) => {
      if (isOutput(e)) seen.push(e.data.length)
      return true
    })
    log.appendData('stdout', null, read('w'))
    expect(seen).toEqual([])
    await vi.waitFor(() => expect(seen).toEqual([4096]))
  })

  it('records gathered bytes before a run exit, another stream or another run, keeping arrival order', () => {
    const log = new OutputLog(1 << 20, () => {}, undefined, true)
    const seen: string[] = []
    log.subscribe(0, (e) => {
      seen.push(isOutput(e) ? `${e.type}:${e.id}:${e.offset}:${e.data.length}` : `${e.type}:${e.offset}`)
      return true
    })
    log.appendRunStart('r1')
    log.appendData('stdout', 'r1', read('a'))
    log.appendData('stdout', 'r1', read('b'))
    log.appendData('stderr', 'r1', read('E'))
    log.appendData('stdout', 'r1', read('c'))
    log.appendRunExit({ id: 'r1', code: 0, timedOut: false, durationMs: 1 })
    log.appendData('stdout', 'r2', read('d'))
    log.appendData('stdout', null, read('e'))
    log.appendClosed({ code: 0, signal: null, reason: 'exit 0' })
    expect(seen).toEqual([
      'shell_start:0',
      'shell_out:r1:0:8192',
      'shell_err:r1:8192:4096',
      'shell_out:r1:12288:4096',
      'shell_exit:16384',
      'shell_out:r2:16384:4096',
      'shell_out:null:20480:4096',
      'shell_closed:24576',
    ])
    expect(replayed(log, 0)).toEqual({
      text:
        'a'.repeat(4096) +
        'b'.repeat(4096) +
        'E'.repeat(4096) +
        'c'.repeat(4096) +
        'd'.repeat(4096) +
        'e'.repeat(4096),
      offsetsExact: true,
    })
  })

  it('replays gathered bytes not yet recorded, from any offset inside them, exactly', () => {
    const log = new OutputLog(1 << 20, () => {}, undefined, true)
    for (const c of 'hijk') log.appendData('stdout', null, read(c, 2000))
    expect(replayed(log, 0)).toEqual({
      text: ['h', 'i', 'j', 'k'].map((c) => c.repeat(2000)).join(''),
      offsetsExact: true,
    })
    log.appendData('stdout', null, read('l', 2000))
    expect(replayed(log, 7999)).toEqual({ text: `k${'l'.repeat(2000)}`, offsetsExact: true })
    const seen: number[] = []
    const { replay } = log.subscribe(9000, (e) => {
      if (isOutput(e)) seen.push(e.offset)
      return true
    })
    expect(replay.map((e) => (isOutput(e) ? `${e.offset}:${e.data.length}` : e.type))).toEqual(['9000:1000'])
    log.appendData('stdout', null, read('m', 2000))
    log.flush()
    expect(seen).toEqual([10_000])
  })

  it('keeps OUTPUT_LOST and the byte bound when gathered records are evicted', () => {
    const log = new OutputLog(64 * 1024, () => {}, undefined, true)
    for (let i = 0; i < 1000; i++) log.appendData('stdout', null, read('z', 2000))
    log.flush()
    expect(log.heldBytes).toBeLessThanOrEqual(64 * 1024)
    expect(countedBytes(log)).toBe(log.heldBytes)
    expect(log.startOffset).toBeGreaterThan(0)
    expect(() => log.readFrom(log.startOffset - 1)).toThrow(/evicted/)
    expect(replayed(log, log.startOffset)).toEqual({
      text: 'z'.repeat(log.endOffset - log.startOffset),
      offsetsExact: true,
    })
  })

  it('keeps a shared scrollback budget while two terminals flood it in turns', () => {
    const budget = new ScrollbackBudget(96 * 1024)
    const a = new OutputLog(1 << 20, () => {}, budget, true)
    const b = new OutputLog(1 << 20, () => {}, budget, true)
    for (let i = 0; i < 200; i++) {
      a.appendData('stdout', null, read('a', 3000))
      b.appendData('stdout', null, read('b', 3000))
      expect(budget.heldBytes).toBeLessThanOrEqual(96 * 1024)
    }
    a.flush()
    b.flush()
    expect(budget.heldBytes).toBe(a.heldBytes + b.heldBytes)
    expect(budget.heldBytes).toBeLessThanOrEqual(96 * 1024)
    for (const [log, c] of [
      [a, 'a'],
      [b, 'b'],
    ] as const) {
      expect(replayed(log, log.startOffset)).toEqual({
        text: c.repeat(log.endOffset - log.startOffset),
        offsetsExact: true,
      })
      expect(() => log.readFrom(log.startOffset - 1)).toThrow(/evicted/)
    }
  })

  it('records a large read at once, without waiting for company', () => {
    const log = new OutputLog(1 << 20, () => {}, undefined, true)
    const seen: number[] = []
    log.subscribe(0, (e) => {
      if (isOutput(e)) seen.push(e.data.length)
      return true
    })
    log.appendData('stdout', null, read('q', 40_000))
    expect(seen).toEqual([40_000])
  })

  it('tells its owner to pause once a full subscriber gets the gathered record', async () => {
    const pressure: boolean[] = []
    const log = new OutputLog(1 << 20, (full) => pressure.push(full), undefined, true)
    log.subscribe(0, () => false)
    log.appendData('stdout', null, read('s'))
    expect(pressure).toEqual([])
    await vi.waitFor(() => expect(pressure).toEqual([true]))
  })
})
