import { describe, expect, it } from 'vitest'
import { REFILL_AT, RunWindow, WINDOW_BYTES, WINDOW_LINES } from './run-window.ts'
import { newRun, type Run, type RunRequest } from './session-run.ts'

let ids = 0
function run(extra: Partial<RunRequest> = {}, nonce = `n${ids}`): Run {
  const r = newRun(
    { runId: `r${ids++}`, command: 'true', ...extra },
    1024,
    () => {},
    () => {},
  )
  r.nonce = nonce
  return r
}

describe('RunWindow', () => {
  it('holds at most WINDOW_LINES lines and gives each a slot of its own', () => {
    const w = new RunWindow()
    for (let i = 0; i < WINDOW_LINES; i++) {
      const r = run()
      expect(w.canWrite(r)).toBe(true)
      w.add(r)
    }
    expect(new Set(w.runs.map((r) => r.slot)).size).toBe(WINDOW_LINES)
    expect(w.canWrite(run())).toBe(false)
    w.shift()
    expect(w.canWrite(run())).toBe(true)
  })

  it('wants more lines only once bash has at most REFILL_AT left to run', () => {
    const w = new RunWindow()
    for (let i = 0; i < WINDOW_LINES; i++) w.add(run())
    const wants: boolean[] = []
    while (w.size > 0) {
      wants.push(w.wantsLines)
      w.shift()
    }
    wants.push(w.wantsLines)
    expect(wants.indexOf(true)).toBe(WINDOW_LINES - REFILL_AT)
    expect(wants.slice(WINDOW_LINES - REFILL_AT).every((x) => x)).toBe(true)
  })

  it('writes a run over the byte bound only into an empty window', () => {
    const w = new RunWindow()
    const big = run({ stdin: Buffer.alloc(WINDOW_BYTES) })
    w.add(run())
    expect(w.canWrite(big)).toBe(false)
    w.shift()
    expect(w.canWrite(big)).toBe(true)
    w.add(big)
    expect(w.canWrite(run())).toBe(false)
  })

  it('keeps stdin-pipe and internal runs alone', () => {
    const w = new RunWindow()
    w.add(run())
    expect(w.canWrite(run({ stdinPipe: true }))).toBe(false)
    expect(w.canWrite(run({ internal: true }))).toBe(false)
    w.shift()
    w.add(run({ internal: true }))
    expect(w.canWrite(run())).toBe(false)
  })

  it("a later line's marker ends every earlier line on that stream; output goes to the first not ended", () => {
    const w = new RunWindow()
    const [a, b, c] = [run({}, 'a'), run({}, 'b'), run({}, 'c')]
    for (const r of [a, b, c]) w.add(r)
    expect(w.owner('stdout')).toBe(a)
    w.markEnded(w.indexOf('c'), 'stdout', 0)
    expect([a.done.stdout, b.done.stdout, c.done.stdout, a.done.stderr]).toEqual([true, true, true, false])
    expect(w.owner('stdout')).toBeUndefined()
    expect(w.owner('stderr')).toBe(a)
    expect([a.exitCode, b.exitCode, c.exitCode]).toEqual([null, null, 0])
  })

  it("a held body's marker ends the lines before it and gives the line before its exit code", () => {
    const w = new RunWindow()
    const [a, b] = [run({}, 'a'), run({}, 'b')]
    w.add(a)
    w.add(b)
    b.heldNonce = 'held-b'
    expect(w.indexOfHeld('held-b')).toBe(1)
    w.markHeld(1, 'stdout', 130)
    expect([a.done.stdout, b.done.stdout, b.heldSeen, b.exitCode, a.exitCode]).toEqual([
      true,
      false,
      true,
      null,
      130,
    ])
  })
})
