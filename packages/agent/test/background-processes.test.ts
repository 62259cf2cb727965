import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { BackgroundProcesses } from '../src/background-processes.ts'
import { systemClock } from '../src/clock.ts'
import type { LogEvent } from '../src/log-records.ts'
import { ScrollbackBudget } from '../src/scrollback-budget.ts'
import { pipeSpawn as spawn } from './fixtures.ts'

const cwd = mkdtempSync(join(tmpdir(), 'conch-proc-'))
const table = new BackgroundProcesses(spawn, systemClock, 4, 4096)
afterAll(() => {
  table.killAll()
  rmSync(cwd, { recursive: true, force: true })
})
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
const start = (command: string) => table.start({ command, cwd, env })

describe('background processes', () => {
  it('reports output since an offset and the exit code', async () => {
    const p = start('echo one; echo two >&2; echo three')
    const done = await table.wait(p.id)
    expect(done).toMatchObject({ status: 'exited', exitCode: 0 })
    const all = table.output(p.id)
    expect(all.stdout.toString()).toBe('one\nthree\n')
    expect(all.stderr.toString()).toBe('two\n')
    const later = table.output(p.id, all.nextOffset)
    expect(later.stdout.length + later.stderr.length).toBe(0)
  })

  it('kills the whole process group', async () => {
    const p = start('sleep 60 & sleep 60; wait')
    expect(table.kill(p.id).status).toBe('running')
    const done = await table.wait(p.id)
    expect(done.status).toBe('killed')
    expect(done.signal).toBe('SIGTERM')
  })

  it('escalates to SIGKILL when SIGTERM is ignored', async () => {
    const p = start("trap '' TERM; echo ready; while :; do sleep 0.05; done")
    await new Promise<void>((resolve) => {
      const { subscription } = table.subscribe(p.id, 0, (e: LogEvent) => {
        if ('data' in e) resolve()
        return true
      })
      void subscription
    })
    table.kill(p.id)
    const done = await table.wait(p.id)
    expect(done).toMatchObject({ status: 'killed', signal: 'SIGKILL', exitCode: 137 })
  })

  it('keeps status exited with the real code when kill races a natural exit', async () => {
    const p = start('exit 4')
    await table.wait(p.id)
    expect(table.kill(p.id)).toMatchObject({ status: 'exited', exitCode: 4 })
  })

  it('wait with a timeout returns while the process still runs', async () => {
    const p = start('sleep 30')
    expect((await table.wait(p.id, 50)).status).toBe('running')
    table.kill(p.id, 'SIGKILL')
    expect((await table.wait(p.id)).status).toBe('killed')
  })

  it('answers unknown ids with PROCESS_NOT_FOUND', () => {
    expect(() => table.get('proc_nope')).toThrow(expect.objectContaining({ code: 'PROCESS_NOT_FOUND' }))
  })

  it('streams live output and the end to a subscriber', async () => {
    const p = start('echo a; sleep 0.1; echo b')
    const seen: string[] = []
    await new Promise<void>((resolve) => {
      table.subscribe(p.id, 0, (e) => {
        if ('data' in e) seen.push(e.data.toString())
        if (e.type === 'shell_exit') resolve()
        return true
      })
    })
    expect(seen.join('')).toBe('a\nb\n')
  })
})

describe('bounded memory: finished processes', () => {
  it('forgets the oldest finished processes past the bound, with their output', async () => {
    const budget = new ScrollbackBudget(1 << 20)
    const many = new BackgroundProcesses(spawn, systemClock, 4, 4096, budget)
    const ids: string[] = []
    for (let i = 0; i < 70; i++) {
      const p = many.start({ command: `echo ${i}`, cwd, env })
      ids.push(p.id)
      await many.wait(p.id)
    }
    expect(many.size).toBe(64)
    expect(() => many.get(ids[0]!)).toThrow(expect.objectContaining({ code: 'PROCESS_NOT_FOUND' }))
    expect(many.output(ids[69]!).stdout.toString()).toBe('69\n')
    // The forgotten processes' logs left the budget: only 64 logs, and only their bytes.
    expect(budget.logs).toBe(64)
    expect(budget.heldBytes).toBeLessThan(64 * 4096)
  })
})
