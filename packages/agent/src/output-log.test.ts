import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import {
  DATA_RECORD_OVERHEAD_BYTES,
  EVENT_RECORD_OVERHEAD_BYTES,
  type LogEvent,
  OutputLog,
  recordBytes,
} from './output-log.ts'

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
    const first = watch(log.appendData('stdout', 'r0', pipeChunk('x'.repeat(100))))
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
