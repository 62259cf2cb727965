import { describe, expect } from 'vitest'
import { test } from './runner-fixture.ts'

// Prints `alive <pid>` for each pid in the file whose process still exists and is not a zombie.
const SURVIVORS =
  'for p in $(cat e2e-tree.pids); do if [ -e /proc/$p ] && ! grep -q "^State:[[:space:]]*Z" /proc/$p/status 2>/dev/null; then echo "alive $p"; fi; done'

describe('timeouts', () => {
  test('returns the partial output with timedOut and keeps the shell state', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    await sh.run('cd /usr && export E2E_BEFORE=kept && e2e_fn() { echo fn-ok; }')
    const result = await sh.run('echo started; echo to-stderr >&2; sleep 30; echo never', {
      timeoutMs: 1_000,
    })
    expect(result.timedOut).toBe(true)
    expect(result.stdout).toBe('started\n')
    expect(result.stderr).toBe('to-stderr\n')
    expect(result.exitCode).not.toBe(0)

    const after = await sh.run('pwd; echo "$E2E_BEFORE"; e2e_fn')
    expect(after).toMatchObject({ stdout: '/usr\nkept\nfn-ok\n', exitCode: 0, timedOut: false })
  })

  test('leaves no child or grandchild of the stopped command running', async ({ sandbox }) => {
    // A script that ignores SIGINT and SIGTERM (so only SIGKILL stops it), with a child and a
    // grandchild that inherit that; it records the four pids, then waits forever.
    const script = [
      "trap '' INT TERM",
      'sleep 300 & echo $! >> e2e-tree.pids',
      "bash -c 'sleep 300 & echo $! >> e2e-tree.pids; wait' &",
      'echo $! >> e2e-tree.pids',
      'echo $$ >> e2e-tree.pids',
      'while [ "$(wc -l < e2e-tree.pids)" -lt 4 ]; do sleep 0.02; done',
      'echo tree-ready',
      'wait',
      '',
    ].join('\n')
    await sandbox.files.write('/workspace/e2e-tree.sh', script)
    await using sh = await sandbox.shell()
    await sh.run('rm -f e2e-tree.pids')
    const result = await sh.run('bash e2e-tree.sh', { timeoutMs: 1_500 })
    expect(result.timedOut).toBe(true)
    expect(result.stdout).toBe('tree-ready\n')

    const pids = await sh.run('wc -l < e2e-tree.pids')
    expect(pids.stdout.trim()).toBe('4')
    const survivors = await sh.run(SURVIVORS)
    expect(survivors.stdout).toBe('')
  })

  test('stops a builtin loop running inside bash itself', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const result = await sh.run('echo spinning; while :; do :; done', { timeoutMs: 1_000 })
    expect(result.timedOut).toBe(true)
    expect(result.stdout).toBe('spinning\n')
    const after = await sh.run('echo alive')
    expect(after.stdout).toBe('alive\n')
  })

  test('uses the session default timeout when the run sets none', async ({ sandbox }) => {
    await using sh = await sandbox.shell({ commandTimeoutMs: 1_000 })
    const result = await sh.run('sleep 30')
    expect(result.timedOut).toBe(true)
    expect((await sh.run('echo ok')).stdout).toBe('ok\n')
  })
})
