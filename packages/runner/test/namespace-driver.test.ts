// The namespace driver with the real runner, real bubblewrap, real cgroups and the real agent.
// These tests fail (never skip) when the host cannot run namespace sandboxes: `npm test`
// installs bubblewrap; the runner must be root on Linux with cgroup v1 mounted.
import { mkdtempSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ErrorBody, SandboxInfo } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { exec, nsRunner } from './namespace-runner.ts'
import { createSandbox } from './runner-fixture.ts'

const REPO = fileURLToPath(new URL('../../..', import.meta.url))

describe('namespace driver', () => {
  it('runs a shell at /workspace whose cd and export persist, and says it is namespace-isolated', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const info = SandboxInfo.parse(
      (await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })).json(),
    )
    expect(info).toMatchObject({ driver: 'namespace', isolation: 'namespace', workdir: '/workspace' })
    expect(info.description).toMatch(/shares the host kernel/)
    expect((await exec(runner, id, 'pwd')).stdout).toBe('/workspace\n')
    await exec(runner, id, 'mkdir -p sub && cd sub && export KEPT=yes', 'default')
    expect(await exec(runner, id, 'pwd; echo $KEPT; echo $HOME', 'default')).toMatchObject({
      stdout: '/workspace/sub\nyes\n/workspace\n',
      exitCode: 0,
    })
    expect((await exec(runner, id, 'echo "$USER:$LOGNAME:$(whoami)"', 'default')).stdout).toBe(
      'sandbox:sandbox:sandbox\n',
    )
  })

  it('hides host files, the repo and the runner state dir, and keeps system dirs read-only', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const paths = ['/root', REPO, runner.stateDir, '/etc/shadow', '/sys/fs/cgroup', '/home']
    const probe = paths.map((p) => `test -e '${p}' && echo 'seen ${p}'`).join('; ')
    expect((await exec(runner, id, `${probe}; true`)).stdout).toBe('')
    const writes = await exec(
      runner,
      id,
      'touch /usr/x 2>&1; touch /etc/x 2>&1; touch /x 2>&1; touch /tmp/x /dev/shm/x && echo ok',
    )
    expect(writes.stdout).toMatch(/\/usr\/x.*Read-only file system/)
    expect(writes.stdout).toMatch(/\/etc\/x.*(Read-only file system|Permission denied)/)
    expect(writes.stdout).toMatch(/ok\n$/)
  })

  it("never shows the runner's environment or API key, not even in /proc/*/environ", async () => {
    await using runner = await nsRunner()
    const secret = `conch-test-secret-${Date.now()}`
    process.env.CONCH_API_KEY = secret
    try {
      const id = await createSandbox(runner, { env: { GIVEN: 'by-spec' } })
      const env = await exec(runner, id, 'env; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"')
      expect(env.stdout).not.toContain(secret)
      expect(env.stdout).not.toContain('CONCH_API_KEY')
      expect(env.stdout).toContain('GIVEN=by-spec')
      expect(env.stdout).toContain('PATH=/usr/local/bin:/usr/bin:/bin')
      // pid 1 (bwrap's init) starts with an empty environment; `sh` adds only PWD.
      expect((await exec(runner, id, 'tr "\\0" "\\n" < /proc/1/environ')).stdout).toMatch(/^(PWD=\/\n)?$/)
    } finally {
      delete process.env.CONCH_API_KEY
    }
  })

  it('runs as an unprivileged uid with no capabilities and no_new_privs', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const out = (
      await exec(runner, id, 'id -u; id -g; grep -E "^(CapEff|CapPrm|CapAmb|NoNewPrivs)" /proc/self/status')
    ).stdout
    // The bounding set keeps the agent's few namespace-local capabilities; with no_new_privs and
    // nothing permitted, effective or ambient, no exec can raise them.
    expect(out).toBe(
      '1000\n1000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n',
    )
  })

  it('has no network egress: a host listener on 127.0.0.1 is unreachable', async () => {
    await using runner = await nsRunner()
    let connections = 0
    const server = createServer((socket) => {
      connections += 1
      socket.destroy()
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      const id = await createSandbox(runner)
      const result = await exec(
        runner,
        id,
        `timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/${port}' 2>&1; echo "rc=$?"`,
      )
      expect(result.stdout).toMatch(/Connection refused/)
      expect(result.stdout).not.toMatch(/rc=0/)
      expect(
        (await exec(runner, id, 'ls /sys/class/net 2>/dev/null || cat /proc/net/dev')).stdout,
      ).not.toMatch(/eth|ens|enp/)
      expect(connections).toBe(0)
    } finally {
      server.close()
    }
  })

  it("keeps two sandboxes apart: neither sees the other's files or processes", async () => {
    await using runner = await nsRunner()
    const a = await createSandbox(runner)
    const b = await createSandbox(runner)
    await exec(
      runner,
      a,
      'echo secret > only-a.txt; (exec -a only-a-sleeper sleep 300) > /dev/null 2>&1 &',
      'default',
    )
    const seen = await exec(
      runner,
      b,
      'ls -A /workspace; ps -eo args; cat /proc/*/cmdline 2>/dev/null | tr "\\0" " "',
    )
    expect(seen.stdout).not.toContain('only-a')
    expect((await exec(runner, a, 'cat only-a.txt; ps -eo args | grep -c [o]nly-a-sleeper')).stdout).toBe(
      'secret\n1\n',
    )
  })

  it('stops a fork bomb at the pids limit while the runner and other sandboxes stay fine', async () => {
    await using runner = await nsRunner()
    const bombed = await createSandbox(runner, { limits: { pids: 64 } })
    const other = await createSandbox(runner)
    // dash, unlike bash, does not retry a failed fork for seconds.
    const bomb = await exec(
      runner,
      bombed,
      `sh -c 'for i in $(seq 200); do sleep 5 >/dev/null 2>&1 & done; echo done' 2>&1; echo "rc=$?"; ps -e | wc -l`,
    )
    expect(bomb.stdout).toMatch(/Resource temporarily unavailable|Cannot fork/)
    expect(bomb.stdout).not.toMatch(/rc=0/)
    expect((await exec(runner, other, 'echo fine')).stdout).toBe('fine\n')
    expect((await runner.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
  }, 20_000)

  it('answers files API path traversal with PATH_OUTSIDE_SANDBOX and serves /workspace files', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    await exec(runner, id, 'echo from-shell > note.txt')
    const note = await runner.app.inject({
      method: 'GET',
      url: `/v1/sandboxes/${id}/files?path=note.txt`,
      headers: runner.auth,
    })
    expect(note.body).toBe('from-shell\n')
    for (const path of ['../../etc/passwd', '/etc/passwd', '/workspace/../../x', '../../../root']) {
      const res = await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${id}/files/stat?path=${encodeURIComponent(path)}`,
        headers: runner.auth,
      })
      expect(ErrorBody.parse(res.json()).error.code, path).toBe('PATH_OUTSIDE_SANDBOX')
    }
  })

  it('reconnects to the namespaced agent after a runner restart; the shell keeps cwd and env', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-ns-restart-'))
    let id: string
    {
      await using first = await nsRunner({ stateDir, keepAgents: true, removeStateDir: false })
      id = await createSandbox(first)
      await exec(first, id, 'cd /tmp && export KEPT=yes', 'default')
    }
    await using second = await nsRunner({ stateDir, removeStateDir: true })
    const info = SandboxInfo.parse(
      (await second.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: second.auth })).json(),
    )
    expect(info.status).toBe('running')
    expect((await exec(second, id, 'pwd; echo $KEPT', 'default')).stdout).toBe('/tmp\nyes\n')
  })

  it('destroys a sandbox: its processes, workspace and cgroups are gone', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const record = runner.app.conch.manager.get(id).record
    const state = record.driverState as { dir: string; cgroup: { dirs: string[] }; pid: number }
    const res = await runner.app.inject({
      method: 'DELETE',
      url: `/v1/sandboxes/${id}`,
      headers: runner.auth,
    })
    expect(res.statusCode).toBeLessThan(300)
    const { existsSync } = await import('node:fs')
    expect(existsSync(state.dir)).toBe(false)
    expect(state.cgroup.dirs.length).toBeGreaterThan(0)
    expect(state.cgroup.dirs.filter((d) => existsSync(d))).toEqual([])
    expect(existsSync(`/proc/${state.pid}`)).toBe(false)
  })
})
