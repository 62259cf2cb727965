import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { describe, expect, it } from 'vitest'
import { type SandboxRecord, StateStore } from './state-store.ts'

const sandbox = (id: string): SandboxRecord => ({
  id,
  status: 'running',
  driver: 'local',
  isolation: 'none',
  description: 'no isolation',
  workdir: '/w',
  limits: { pids: 10 },
  metadata: { a: 'b' },
  env: { X: '1' },
  idleTimeoutMs: null,
  hibernateAfterMs: null,
  sessionIdleTimeoutMs: null,
  createdAt: 1,
  deadReason: null,
  driverState: { pid: 5 },
})

describe('StateStore', () => {
  it('keeps sandboxes, sessions and tokens across reopening the same dir', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-state-'))
    try {
      const a = StateStore.open(dir)
      a.putSandbox(sandbox('sb_aaaaaaaa'))
      a.addSession('sb_aaaaaaaa', 'default', 2)
      a.addToken({ hash: 'ab', sandboxId: 'sb_aaaaaaaa', expiresAt: 100 }, 3)
      a.addApiKeyHash('cd', 4)
      a.close()
      const b = StateStore.open(dir)
      expect(b.getSandbox('sb_aaaaaaaa')).toEqual(sandbox('sb_aaaaaaaa'))
      expect(b.countSessions('sb_aaaaaaaa')).toBe(1)
      expect(b.getToken('ab')).toEqual({ hash: 'ab', sandboxId: 'sb_aaaaaaaa', expiresAt: 100 })
      expect(b.apiKeyHashes()).toEqual(['cd'])
      b.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('keeps idle settings, and opens a database from before them with every sandbox kept awake', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-state-'))
    try {
      const old = new DatabaseSync(join(dir, 'runner.db'))
      old.exec(`CREATE TABLE sandboxes (
        id TEXT PRIMARY KEY, status TEXT NOT NULL, driver TEXT NOT NULL, isolation TEXT NOT NULL,
        description TEXT NOT NULL, workdir TEXT NOT NULL, limits TEXT NOT NULL, metadata TEXT NOT NULL,
        env TEXT NOT NULL, idle_timeout_ms INTEGER, created_at INTEGER NOT NULL, dead_reason TEXT,
        driver_state TEXT NOT NULL)`)
      old.exec(`INSERT INTO sandboxes VALUES ('sb_oldoldol', 'running', 'local', 'none', 'd', '/w', '{}', '{}',
        '{}', 5000, 1, NULL, '{}')`)
      old.close()
      const s = StateStore.open(dir)
      expect(s.getSandbox('sb_oldoldol')).toMatchObject({
        idleTimeoutMs: 5000,
        hibernateAfterMs: null,
        sessionIdleTimeoutMs: null,
      })
      s.putSandbox({ ...sandbox('sb_newnewne'), hibernateAfterMs: 600_000, sessionIdleTimeoutMs: 60_000 })
      expect(s.getSandbox('sb_newnewne')).toMatchObject({
        hibernateAfterMs: 600_000,
        sessionIdleTimeoutMs: 60_000,
      })
      s.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('deletes a sandbox together with its sessions and tokens', () => {
    const s = StateStore.memory()
    s.putSandbox(sandbox('sb_bbbbbbbb'))
    s.addSession('sb_bbbbbbbb', 'x', 1)
    s.addToken({ hash: 'ef', sandboxId: 'sb_bbbbbbbb', expiresAt: 10 }, 1)
    s.deleteSandbox('sb_bbbbbbbb')
    expect(s.getSandbox('sb_bbbbbbbb')).toBeUndefined()
    expect(s.countAllSessions()).toBe(0)
    expect(s.getToken('ef')).toBeUndefined()
  })

  it('rolls back every write of a failed transaction', () => {
    const s = StateStore.memory()
    expect(() =>
      s.transaction(() => {
        s.putSandbox(sandbox('sb_cccccccc'))
        throw new Error('crash')
      }),
    ).toThrow('crash')
    expect(s.listSandboxes()).toEqual([])
  })
})
