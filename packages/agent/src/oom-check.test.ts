import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { oomCheck, parseOomKills } from './oom-check.ts'

const V1 = (n: number) => `oom_kill_disable 0\nunder_oom 0\noom_kill ${n}\n`
const V2 = (n: number) => `low 0\nhigh 0\nmax 4\noom ${n}\noom_kill ${n}\noom_group_kill 0\n`

function eventsFile(text: string): { path: string; set: (text: string) => void } {
  const path = join(mkdtempSync(join(tmpdir(), 'oom-check-')), 'events')
  writeFileSync(path, text)
  return { path, set: (next) => writeFileSync(path, next) }
}

describe('parseOomKills', () => {
  it('reads the oom_kill line of cgroup v1 memory.oom_control and v2 memory.events', () => {
    expect(parseOomKills(V1(3))).toBe(3)
    expect(parseOomKills(V2(5))).toBe(5)
    expect(parseOomKills('oom_kill_disable 0\n')).toBeNull()
  })
})

describe('oomCheck', () => {
  it('marks a 137 exit only when the count grew since the last read', () => {
    const file = eventsFile(V1(2))
    const check = oomCheck(file.path)
    expect(check(137)).toBe(false)
    file.set(V1(3))
    expect(check(137)).toBe(true)
    expect(check(137)).toBe(false)
  })

  it('does not read the file for other exit codes, so the next 137 still sees the kill', () => {
    const file = eventsFile(V2(0))
    const check = oomCheck(file.path)
    file.set(V2(1))
    expect(check(0)).toBe(false)
    expect(check(1)).toBe(false)
    expect(check(137)).toBe(true)
  })

  it('answers false without a file or when the file is gone', () => {
    expect(oomCheck(undefined)(137)).toBe(false)
    expect(oomCheck('/nonexistent/oom_events')(137)).toBe(false)
  })
})
