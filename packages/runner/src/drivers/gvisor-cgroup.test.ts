// The reads of runsc's sandbox cgroup against fake cgroupfs trees (v1 and v2) in a temp dir; the
// real kernel's files are read by the gVisor driver tests (test/gvisor-driver.test.ts).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { gvisorCgroupStats, gvisorCgroupsPath, gvisorHostOomKills } from './gvisor-cgroup.ts'

/** A temp dir removed at the end of the scope. */
function tempRoot(): { root: string } & Disposable {
  const root = mkdtempSync(join(tmpdir(), 'conch-gvcg-'))
  return { root, [Symbol.dispose]: () => rmSync(root, { recursive: true, force: true }) }
}

/** Writes `files` into `dir`. */
function files(dir: string, contents: Record<string, string>): void {
  mkdirSync(dir, { recursive: true })
  for (const [name, text] of Object.entries(contents)) writeFileSync(join(dir, name), text)
}

describe('gVisor sandbox cgroup', () => {
  it('reads v1 usage from the group runsc made under each controller', () => {
    using fs = tempRoot()
    const path = gvisorCgroupsPath('sb_a')
    const controllers = {
      pids: join(fs.root, 'pids'),
      memory: join(fs.root, 'memory'),
      cpuacct: join(fs.root, 'cpuacct'),
    }
    files(join(controllers.pids, path), { 'pids.current': '212\n', 'cgroup.procs': '' })
    files(join(controllers.memory, path), {
      'memory.usage_in_bytes': '1048576\n',
      'memory.max_usage_in_bytes': '2097152\n',
      'memory.oom_control': 'oom_kill_disable 0\nunder_oom 0\noom_kill 2\n',
    })
    files(join(controllers.cpuacct, path), { 'cpuacct.usage': '1500000000\n' })
    expect(gvisorCgroupStats('sb_a', { version: 1, controllers })).toEqual({
      memoryBytes: 1048576,
      memoryPeakBytes: 2097152,
      cpuSeconds: 1.5,
      pids: 212,
      oomKills: 2,
    })
    expect(gvisorHostOomKills('sb_a', fs.root)).toBe(2)
    expect(gvisorCgroupStats('sb_gone', { version: 1, controllers })).toBeNull()
  })

  it('reads v2 usage from the group below the mount', () => {
    using fs = tempRoot()
    files(join(fs.root, gvisorCgroupsPath('sb_b')), {
      'memory.current': '4096\n',
      'memory.peak': '8192\n',
      'cpu.stat': 'usage_usec 250000\nuser_usec 200000\nsystem_usec 50000\n',
      'pids.current': '30\n',
      'memory.events': 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n',
    })
    const host = {
      version: 2 as const,
      mount: fs.root,
      runnerGroup: fs.root,
      delegated: join(fs.root, 'conch'),
      createsSubtree: true,
      localEvents: false,
    }
    expect(gvisorCgroupStats('sb_b', host)).toEqual({
      memoryBytes: 4096,
      memoryPeakBytes: 8192,
      cpuSeconds: 0.25,
      pids: 30,
      oomKills: 1,
    })
    expect(gvisorHostOomKills('sb_b', fs.root)).toBe(1)
  })
})
