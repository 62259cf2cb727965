// The runner's durable state: one SQLite database (node:sqlite, WAL) in the state dir.
// Every multi-row change runs in one transaction, so a crash leaves either the old or the new
// state. Client secrets are never stored: API keys and tokens are kept as SHA-256 hashes; the only
// secrets kept are the runner's own signing keys (`runnerSecret`), which never leave it.
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { DatabaseSync, type StatementSync } from 'node:sqlite'
import type { Isolation, SandboxLimits, SandboxStatus } from '@conch/protocol'
import { prepareStateDir, StateDirError } from './state-dir.ts'

/** A sandbox as stored; `driverState` is the driver's opaque handle (socket path, pid, cid…). */
export interface SandboxRecord {
  /** Sandbox id. */
  id: string
  /** Lifecycle status (never `destroyed`: a destroyed sandbox is deleted). */
  status: Exclude<SandboxStatus, 'destroyed'>
  /** Driver name. */
  driver: string
  /** Isolation level of the driver. */
  isolation: Isolation
  /** What the driver does and does not isolate. */
  description: string
  /** Workspace directory as its shells see it. */
  workdir: string
  /** Resource limits as requested. */
  limits: SandboxLimits
  /** Labels. */
  metadata: Record<string, string>
  /** Base environment of the sandbox's sessions. */
  env: Record<string, string>
  /** Idle timeout in ms, if any. */
  idleTimeoutMs: number | null
  /** Idle time after which it hibernates, if ever. */
  hibernateAfterMs: number | null
  /** Idle time after which one of its sessions (not the default) is deleted, if ever. */
  sessionIdleTimeoutMs: number | null
  /** Creation time. */
  createdAt: number
  /** Why the agent is gone (`dead`) or does not answer (`unreachable`). */
  deadReason: string | null
  /** The driver's handle, JSON. */
  driverState: Record<string, unknown>
}

/** A sandbox-scoped token as stored (hash only). */
export interface TokenRecord {
  /** SHA-256 of the secret, hex. */
  hash: string
  /** Sandbox it grants. */
  sandboxId: string
  /** Expiry time. */
  expiresAt: number
}

interface SandboxRow {
  id: string
  status: string
  driver: string
  isolation: string
  description: string
  workdir: string
  limits: string
  metadata: string
  env: string
  idle_timeout_ms: number | null
  created_at: number
  dead_reason: string | null
  driver_state: string
  lifetime: string
}

/** The `lifetime` column: the idle settings added after the first schema, as JSON. */
interface StoredLifetime {
  hibernateAfterMs?: number | null
  sessionIdleTimeoutMs?: number | null
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (hash TEXT PRIMARY KEY, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sandboxes (
  id TEXT PRIMARY KEY, status TEXT NOT NULL, driver TEXT NOT NULL, isolation TEXT NOT NULL,
  description TEXT NOT NULL, workdir TEXT NOT NULL, limits TEXT NOT NULL, metadata TEXT NOT NULL,
  env TEXT NOT NULL, idle_timeout_ms INTEGER, created_at INTEGER NOT NULL, dead_reason TEXT,
  driver_state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
  id TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (sandbox_id, id)
);
CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY,
  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tokens_expiry ON tokens(expires_at);
`

/** The runner's SQLite store. Open it with `StateStore.open(dir)` or `StateStore.memory()`. */
export class StateStore {
  readonly #db: DatabaseSync
  readonly #stmts = new Map<string, StatementSync>()

  private constructor(db: DatabaseSync) {
    this.#db = db
    db.exec('PRAGMA foreign_keys = ON')
    db.exec('PRAGMA busy_timeout = 5000')
    db.exec(SCHEMA)
    const columns = db.prepare('PRAGMA table_info(sandboxes)').all() as { name: string }[]
    if (!columns.some((c) => c.name === 'lifetime')) {
      db.exec("ALTER TABLE sandboxes ADD COLUMN lifetime TEXT NOT NULL DEFAULT '{}'")
    }
  }

  /** Opens (or creates) `runner.db` in `stateDir`, in WAL mode; StateDirError when it cannot. */
  static open(stateDir: string): StateStore {
    prepareStateDir(stateDir)
    const path = join(stateDir, 'runner.db')
    try {
      const db = new DatabaseSync(path)
      db.exec('PRAGMA journal_mode = WAL')
      db.exec('PRAGMA synchronous = NORMAL')
      return new StateStore(db)
    } catch (error) {
      throw new StateDirError(
        `cannot open the database ${path}: ${(error as Error).message}; move it away to start afresh, or pass another --state-dir`,
        { cause: error },
      )
    }
  }

  /** An in-memory store, for tests. */
  static memory(): StateStore {
    return new StateStore(new DatabaseSync(':memory:'))
  }

  #stmt(sql: string): StatementSync {
    let s = this.#stmts.get(sql)
    if (!s) {
      s = this.#db.prepare(sql)
      this.#stmts.set(sql, s)
    }
    return s
  }

  /** Runs `fn` in one transaction: all of its writes land, or none. */
  transaction<T>(fn: () => T): T {
    this.#db.exec('BEGIN IMMEDIATE')
    try {
      const out = fn()
      this.#db.exec('COMMIT')
      return out
    } catch (error) {
      this.#db.exec('ROLLBACK')
      throw error
    }
  }

  /** The stored API key hashes. */
  apiKeyHashes(): string[] {
    return this.#stmt('SELECT hash FROM api_keys ORDER BY created_at')
      .all()
      .map((r) => String(r.hash))
  }

  /** Records an API key hash. */
  addApiKeyHash(hash: string, now: number): void {
    this.#stmt('INSERT OR IGNORE INTO api_keys (hash, created_at) VALUES (?, ?)').run(hash, now)
  }

  /** A value of the runner's own bookkeeping (the `meta` table), or undefined. */
  getMeta(key: string): string | undefined {
    const row = this.#stmt('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined
    return row?.value
  }

  /** Sets (or, with null, removes) a value of the runner's own bookkeeping. */
  setMeta(key: string, value: string | null): void {
    if (value === null) this.#stmt('DELETE FROM meta WHERE key = ?').run(key)
    else this.#stmt('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)').run(key, value)
  }

  /** Inserts or replaces a sandbox. */
  putSandbox(s: SandboxRecord): void {
    this.#stmt(
      `INSERT OR REPLACE INTO sandboxes (id, status, driver, isolation, description, workdir, limits, metadata,
        env, idle_timeout_ms, created_at, dead_reason, driver_state, lifetime)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      s.id,
      s.status,
      s.driver,
      s.isolation,
      s.description,
      s.workdir,
      JSON.stringify(s.limits),
      JSON.stringify(s.metadata),
      JSON.stringify(s.env),
      s.idleTimeoutMs,
      s.createdAt,
      s.deadReason,
      JSON.stringify(s.driverState),
      JSON.stringify({
        hibernateAfterMs: s.hibernateAfterMs,
        sessionIdleTimeoutMs: s.sessionIdleTimeoutMs,
      } satisfies StoredLifetime),
    )
  }

  /** Updates a sandbox's status (and the reason when it is dead or unreachable). */
  setSandboxStatus(id: string, status: SandboxRecord['status'], deadReason: string | null = null): void {
    this.#stmt('UPDATE sandboxes SET status = ?, dead_reason = ? WHERE id = ?').run(status, deadReason, id)
  }

  /** Updates a sandbox's driver handle. */
  setDriverState(id: string, state: Record<string, unknown>): void {
    this.#stmt('UPDATE sandboxes SET driver_state = ? WHERE id = ?').run(JSON.stringify(state), id)
  }

  /** One sandbox, or undefined. */
  getSandbox(id: string): SandboxRecord | undefined {
    const row = this.#stmt('SELECT * FROM sandboxes WHERE id = ?').get(id)
    return row ? toSandbox(row as unknown as SandboxRow) : undefined
  }

  /** Every sandbox, oldest first. */
  listSandboxes(): SandboxRecord[] {
    return this.#stmt('SELECT * FROM sandboxes ORDER BY created_at, id')
      .all()
      .map((r) => toSandbox(r as unknown as SandboxRow))
  }

  /** Removes a sandbox with its sessions and tokens, in one transaction. */
  deleteSandbox(id: string): void {
    this.transaction(() => {
      this.#stmt('DELETE FROM tokens WHERE sandbox_id = ?').run(id)
      this.#stmt('DELETE FROM sessions WHERE sandbox_id = ?').run(id)
      this.#stmt('DELETE FROM sandboxes WHERE id = ?').run(id)
    })
  }

  /** Records a session. */
  addSession(sandboxId: string, sessionId: string, now: number): void {
    this.#stmt('INSERT OR IGNORE INTO sessions (sandbox_id, id, created_at) VALUES (?, ?, ?)').run(
      sandboxId,
      sessionId,
      now,
    )
  }

  /** Forgets a session. */
  deleteSession(sandboxId: string, sessionId: string): void {
    this.#stmt('DELETE FROM sessions WHERE sandbox_id = ? AND id = ?').run(sandboxId, sessionId)
  }

  /** Whether a session is recorded. */
  hasSession(sandboxId: string, sessionId: string): boolean {
    return (
      this.#stmt('SELECT 1 FROM sessions WHERE sandbox_id = ? AND id = ?').get(sandboxId, sessionId) !==
      undefined
    )
  }

  /** The ids of a sandbox's recorded sessions, oldest first. */
  listSessionIds(sandboxId: string): string[] {
    return this.#stmt('SELECT id FROM sessions WHERE sandbox_id = ? ORDER BY created_at, rowid')
      .all(sandboxId)
      .map((row) => String(row.id))
  }

  /** How many sessions a sandbox has. */
  countSessions(sandboxId: string): number {
    const row = this.#stmt('SELECT COUNT(*) AS n FROM sessions WHERE sandbox_id = ?').get(sandboxId)
    return Number(row?.n ?? 0)
  }

  /** How many sessions are recorded in total. */
  countAllSessions(): number {
    return Number(this.#stmt('SELECT COUNT(*) AS n FROM sessions').get()?.n ?? 0)
  }

  /** Records a token hash; expired tokens are purged in the same transaction. */
  addToken(t: TokenRecord, now: number): void {
    this.transaction(() => {
      this.#stmt('DELETE FROM tokens WHERE expires_at <= ?').run(now)
      this.#stmt('INSERT INTO tokens (hash, sandbox_id, expires_at) VALUES (?, ?, ?)').run(
        t.hash,
        t.sandboxId,
        t.expiresAt,
      )
    })
  }

  /** The token with this hash, expired or not. */
  getToken(hash: string): TokenRecord | undefined {
    const row = this.#stmt('SELECT hash, sandbox_id, expires_at FROM tokens WHERE hash = ?').get(hash)
    if (!row) return undefined
    return { hash: String(row.hash), sandboxId: String(row.sandbox_id), expiresAt: Number(row.expires_at) }
  }

  /**
   * A random secret of the runner's own, named `name`: created (32 random bytes, hex) on first
   * use and kept in the state, so what it signs survives a restart. Never leaves the runner.
   */
  runnerSecret(name: string): string {
    const key = `secret:${name}`
    const row = this.#stmt('SELECT value FROM meta WHERE key = ?').get(key)
    if (row) return String(row.value)
    this.#stmt('INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)').run(
      key,
      randomBytes(32).toString('hex'),
    )
    return String(this.#stmt('SELECT value FROM meta WHERE key = ?').get(key)?.value)
  }

  /** Closes the database. */
  close(): void {
    if (this.#db.isOpen) this.#db.close()
  }
}

function toSandbox(r: SandboxRow): SandboxRecord {
  // A sandbox stored before these settings existed never hibernates and keeps its sessions.
  const lifetime = JSON.parse(r.lifetime) as StoredLifetime
  return {
    id: r.id,
    status: r.status as SandboxRecord['status'],
    driver: r.driver,
    isolation: r.isolation as Isolation,
    description: r.description,
    workdir: r.workdir,
    limits: JSON.parse(r.limits) as SandboxLimits,
    metadata: JSON.parse(r.metadata) as Record<string, string>,
    env: JSON.parse(r.env) as Record<string, string>,
    idleTimeoutMs: r.idle_timeout_ms,
    hibernateAfterMs: lifetime.hibernateAfterMs ?? null,
    sessionIdleTimeoutMs: lifetime.sessionIdleTimeoutMs ?? null,
    createdAt: r.created_at,
    deadReason: r.dead_reason,
    driverState: JSON.parse(r.driver_state) as Record<string, unknown>,
  }
}
