import { ConchError, Sandbox } from '@conch/sdk'
import { describe, expect } from 'vitest'
import { connectionOf, test } from './runner-fixture.ts'

const SETUP = [
  'mkdir -p /workspace/app/src && cd /workspace/app',
  'pushd src >/dev/null && pushd -n /workspace >/dev/null',
  'export E2E_EXPORTED="exported value"; E2E_PLAIN=plain; declare -a E2E_ARR=(1 "two words")',
  'greet() { echo "hello, $1"; }',
  "alias e2e_alias='echo aliased'",
  'set -o pipefail; shopt -s extglob; umask 0027',
  "trap 'echo trapped' USR1",
  'printf "binary\\0\\377data" > /workspace/app/blob.bin; chmod 0750 /workspace/app/blob.bin; ln -s /etc/passwd /workspace/app/link; mkdir /workspace/empty',
]

const CHECK = [
  'pwd; dirs -l -p; echo "$E2E_EXPORTED|$E2E_PLAIN|${E2E_ARR[1]}"; greet world; e2e_alias',
  'set -o | grep -E "^pipefail"; shopt extglob; umask; trap -p USR1',
  'od -An -c /workspace/app/blob.bin; stat -c "%a %F" /workspace/app/blob.bin /workspace/app/link /workspace/empty; readlink /workspace/app/link',
].join('; ')

function codeOf(error: unknown): string | undefined {
  return error instanceof ConchError ? error.code : undefined
}

describe('snapshots', () => {
  test('a fork has the workspace and every session, reattached by id, with its history', async ({
    runner,
    sandbox,
  }) => {
    await using sh = await sandbox.shell()
    for (const command of SETUP) expect((await sh.run(command)).exitCode, command).toBe(0)
    const expected = (await sh.run(CHECK)).stdout
    const history = (await sh.history()).map((e) => e.command)
    const snap = await sandbox.snapshot({ name: 'e2e' })
    expect(snap.sessions).toEqual([sh.sessionId])
    expect(snap.name).toBe('e2e')

    await using fork = await Sandbox.create({ ...connectionOf(runner), fromSnapshot: snap.id })
    expect(fork.info.restoredFrom).toEqual({
      snapshotId: snap.id,
      sessions: [{ id: sh.sessionId, problems: [] }],
      processesRestarted: 0,
    })
    await using again = await fork.reattachShell(sh.sessionId)
    expect(again.resumed).toEqual({ snapshotId: snap.id, processesRestarted: 0 })
    expect(sh.resumed).toBeNull()
    expect((await again.history()).map((e) => e.command)).toEqual(history)
    expect((await again.run(CHECK)).stdout).toBe(expected)
    expect(expected).toContain('/workspace/app/src\n')
    expect(expected).toContain('hello, world\naliased\n')
  })

  test('ten forks of one snapshot diverge independently', async ({ runner, sandbox }) => {
    await using sh = await sandbox.shell()
    await sh.run('echo base > /workspace/who; export WHO=base')
    const snap = await sandbox.snapshot()
    const forks = await Promise.all(
      Array.from({ length: 10 }, () => Sandbox.create({ ...connectionOf(runner), fromSnapshot: snap.id })),
    )
    try {
      await Promise.all(
        forks.map(async (fork, i) => {
          await using s = await fork.reattachShell(sh.sessionId)
          await s.run(`echo fork${i} >> /workspace/who; export WHO=fork${i}`)
        }),
      )
      const seen = await Promise.all(
        forks.map(async (fork) => {
          await using s = await fork.reattachShell(sh.sessionId)
          return (await s.run('echo "$WHO"; cat /workspace/who')).stdout
        }),
      )
      expect(seen).toEqual(forks.map((_, i) => `fork${i}\nbase\nfork${i}\n`))
      expect((await sh.run('echo "$WHO"; cat /workspace/who')).stdout).toBe('base\nbase\n')
    } finally {
      await Promise.all(forks.map((f) => f.destroy()))
    }
  })

  test('lists background processes and restarts them only when asked', async ({ runner, sandbox }) => {
    await sandbox.startProcess('sleep 300')
    const snap = await sandbox.snapshot()
    expect(snap.processes).toEqual([{ command: 'sleep 300', cwd: '/workspace', running: true }])
    await using quiet = await Sandbox.create({ ...connectionOf(runner), fromSnapshot: snap.id })
    expect(await quiet.listProcesses()).toEqual([])
    await using restarted = await Sandbox.create({
      ...connectionOf(runner),
      fromSnapshot: snap.id,
      restartProcesses: true,
    })
    expect(restarted.info.restoredFrom?.processesRestarted).toBe(1)
    expect((await restarted.listProcesses()).map((p) => [p.info.command, p.info.status])).toEqual([
      ['sleep 300', 'running'],
    ])
  })

  test('lists and deletes snapshots; a deleted snapshot cannot be forked', async ({ runner, sandbox }) => {
    const snap = await sandbox.snapshot({ name: 'to-delete' })
    expect((await sandbox.listSnapshots()).map((s) => s.id)).toContain(snap.id)
    expect((await Sandbox.listSnapshots(connectionOf(runner))).map((s) => s.id)).toContain(snap.id)
    await Sandbox.deleteSnapshot(snap.id, connectionOf(runner))
    expect((await sandbox.listSnapshots()).map((s) => s.id)).not.toContain(snap.id)
    const error = await Sandbox.create({ ...connectionOf(runner), fromSnapshot: snap.id }).catch((e) => e)
    expect(codeOf(error)).toBe('SNAPSHOT_NOT_FOUND')
    expect((error as Error).message).toContain('list snapshots')
  })
})

describe('hibernation', () => {
  test('a hibernated sandbox keeps its id, frees its processes, and wakes on the next attach with its shells', async ({
    runner,
    sandbox,
  }) => {
    await using sh = await sandbox.shell()
    for (const command of SETUP) expect((await sh.run(command)).exitCode, command).toBe(0)
    const expected = (await sh.run(CHECK)).stdout
    await sandbox.startProcess('sleep 300')
    const info = await sandbox.hibernate()
    expect(info.status).toBe('hibernated')
    const listed = (await Sandbox.list(connectionOf(runner))).find((s) => s.id === sandbox.id)
    expect(listed?.status).toBe('hibernated')

    const again = await Sandbox.connect(sandbox.id, connectionOf(runner))
    await using woken = await again.reattachShell(sh.sessionId)
    expect((await woken.run(CHECK)).stdout).toBe(expected)
    expect(woken.resumed?.processesRestarted).toBe(1)
    expect((await again.refresh()).status).toBe('running')
    expect((await again.listProcesses()).map((p) => [p.info.command, p.info.status])).toEqual([
      ['sleep 300', 'running'],
    ])
    // The snapshot it slept in is gone once it woke.
    expect((await again.listSnapshots()).map((s) => s.name)).not.toContain('hibernation')
  })
})

describe('attacks on snapshots', () => {
  test("a sandbox token snapshots its own sandbox, but cannot list, read, delete or fork others' snapshots", async ({
    runner,
    sandbox,
  }) => {
    const other = await Sandbox.create(connectionOf(runner))
    try {
      const theirs = await other.snapshot()
      const { token } = await sandbox.createAccessToken()
      const scoped = await Sandbox.connect(sandbox.id, { url: runner.url, token })
      const mine = await scoped.snapshot()
      expect(mine.sandboxId).toBe(sandbox.id)
      expect((await scoped.listSnapshots()).map((s) => s.id)).toEqual([mine.id])
      const asToken = { url: runner.url, token }
      const attempts: Array<() => Promise<unknown>> = [
        () => Sandbox.listSnapshots(asToken),
        () => Sandbox.deleteSnapshot(theirs.id, asToken),
        () => Sandbox.create({ ...asToken, fromSnapshot: theirs.id }),
      ]
      for (const attempt of attempts) {
        const error = await attempt().catch((e: unknown) => e)
        expect(codeOf(error)).toBe('FORBIDDEN')
      }
      for (const [method, path] of [
        ['POST', `/v1/sandboxes/${other.id}/snapshots`],
        ['GET', `/v1/sandboxes/${other.id}/snapshots`],
        ['GET', `/v1/snapshots/${theirs.id}`],
      ] as const) {
        const response = await fetch(`${runner.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          ...(method === 'POST' ? { body: '{}' } : {}),
        })
        expect(response.status, `${method} ${path}`).toBe(403)
      }
      expect((await other.listSnapshots()).map((s) => s.id)).toEqual([theirs.id])
    } finally {
      await other.destroy()
    }
  })

  test('links the sandbox made stay links in the fork: nothing outside the workspace is copied in', async ({
    runner,
    sandbox,
  }) => {
    await sandbox.exec('ln -s / /workspace/root; ln -s /etc /workspace/etc-link; mkfifo /workspace/fifo')
    const snap = await sandbox.snapshot()
    expect(snap.entries).toBe(2)
    await using fork = await Sandbox.create({ ...connectionOf(runner), fromSnapshot: snap.id })
    const r = await fork.exec('readlink /workspace/root /workspace/etc-link; ls -A /workspace')
    expect(r.stdout).toBe('/\n/etc\netc-link\nroot\n')
  })

  // A root runner's fork mounts the snapshot's shared tree under its own disk, which then holds
  // only what the fork writes; a runner that copies refuses a workspace larger than the disk
  // (packages/runner/test/fork-overlay-fallback.test.ts).
  test('a fork on a disk smaller than the workspace holds only what it writes, and is ENOSPC past its limit', async ({
    runner,
    sandbox,
  }) => {
    await sandbox.exec('head -c 100000000 /dev/zero > /workspace/big')
    const snap = await sandbox.snapshot()
    const request = {
      ...connectionOf(runner),
      fromSnapshot: snap.id,
      limits: { diskBytes: 64 * 1024 * 1024 },
    }
    if (process.getuid?.() !== 0) {
      // The runner runs as this test's user: not root, so it copies.
      expect(codeOf(await Sandbox.create(request).catch((e: unknown) => e))).toBe('SNAPSHOT_TOO_LARGE')
      return
    }
    await using fork = await Sandbox.create(request)
    const r = await fork.exec(
      'wc -c < /workspace/big; head -c 80000000 /dev/zero > /workspace/more; echo rc=$?',
    )
    expect(r.stdout).toMatch(/^100000000\nrc=1\n$/)
    expect(r.stderr).toContain('No space left on device')
  })

  test('snapshot ids that are paths are not found', async ({ runner }) => {
    for (const id of ['../../etc/passwd', 'snap_..%2F..%2Fx', 'snap_AAAAAAAAAAAAAAAAAAAA']) {
      const error = await Sandbox.create({ ...connectionOf(runner), fromSnapshot: id }).catch((e) => e)
      expect(['SNAPSHOT_NOT_FOUND', 'BAD_REQUEST']).toContain(codeOf(error))
    }
  })
})
