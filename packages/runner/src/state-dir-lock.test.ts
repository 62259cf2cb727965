import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { lockStateDir } from './state-dir-lock.ts'

describe('lockStateDir', () => {
  it('refuses a state dir held by a live process and takes over one left by a dead process', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-lock-'))
    try {
      const release = lockStateDir(dir)
      expect(() => lockStateDir(dir, process.pid + 1_000_000)).toThrow(/another runner \(pid \d+\)/)
      release()
      expect(existsSync(join(dir, 'runner.pid'))).toBe(false)
      writeFileSync(join(dir, 'runner.pid'), '2147483646\n')
      const again = lockStateDir(dir)
      again()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
