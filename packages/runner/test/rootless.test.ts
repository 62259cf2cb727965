// Attacks on a rootless runner: a real `conch runner` process running as an unprivileged user,
// whose namespace driver isolates with bubblewrap in unprivileged user namespaces. This host has
// cgroup v1, which a non-root runner cannot manage, so memory and CPU limits are not enforced;
// pids hold through RLIMIT_NPROC. Code in a sandbox runs as the runner's own host uid, so every
// wall between it and the runner is a namespace: these tests try each one.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { ErrorBody, SandboxInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { rootlessRunner } from './rootless-runner.ts'

describe('attack: reach the runner and the host from a rootless sandbox', () => {
  it('cannot see the state dir, the API key, the runner or host files, and cannot make a user namespace', async () => {
    await using runner = await rootlessRunner()
    const sb = await runner.create()
    expect(sb.driver).toBe('namespace')
    const r = await runner.exec(
      sb.id,
      [
        'id -u',
        `ls ${runner.stateDir} >/dev/null 2>&1; echo statedir=$?`,
        `cat ${join(runner.stateDir, 'conch.db')} >/dev/null 2>&1; echo db=$?`,
        // The key is written in two halves, so no command line inside holds it whole.
        `printf '%s%s\\n' ${runner.apiKey.slice(0, 10)} ${runner.apiKey.slice(10)} > /dev/shm/k`,
        'grep -rslFf /dev/shm/k /proc/[0-9]*/environ /proc/[0-9]*/cmdline /workspace /tmp /etc /run /opt; echo keysearch=done',
        `kill -0 ${runner.child.pid} 2>/dev/null; echo signal-runner=$?`,
        'ls /proc | grep -c "^[0-9]"',
        'test -e /etc/shadow; echo shadow=$?',
        'test -e /root; echo root=$?',
        'test -e /home; echo home=$?',
        'cat /etc/hostname',
        'unshare -Ur true 2>/dev/null; echo unshare=$?',
        'unshare -rm true 2>/dev/null; echo unshare-mount=$?',
        'cat /proc/self/status | grep ^CapEff',
      ].join('; '),
    )
    const out = r.stdout
    expect(out).toMatch(/^1000\n/)
    expect(out).toMatch(/statedir=[12]\n/)
    expect(out).toMatch(/db=1\nkeysearch=done\n/)
    expect(out).not.toContain(runner.apiKey)
    expect(out).toMatch(/signal-runner=1\n/)
    // Only the sandbox's own processes: its pid 1, the agent, the shell and the pipeline.
    expect(Number(/\n(\d+)\nshadow=/.exec(out)?.[1])).toBeLessThan(12)
    expect(out).toMatch(/shadow=1\n/)
    expect(out).toMatch(/root=1\n/)
    expect(out).toMatch(/home=1\n/)
    expect(out).toMatch(/\nsandbox\n/)
    expect(out).toMatch(/unshare=1\n/)
    expect(out).toMatch(/unshare-mount=1\n/)
    expect(out).toMatch(/CapEff:\t0000000000000000/)
    // The sandbox's pid 1 is bwrap: its options (host paths) came through a pipe, not its argv.
    const argv = (await runner.exec(sb.id, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "')).stdout
    expect(argv).toMatch(/bwrap --args 7 -- \/bin\/sh/)
    expect(argv).not.toContain(runner.stateDir)
    expect(argv).not.toMatch(/--bind|node_modules/)
    expect((await runner.request('GET', '/healthz')).status).toBe(200)
  })

  it("cannot read another sandbox's workspace, and kill -9 -1 inside one harms neither the runner nor the other", async () => {
    await using runner = await rootlessRunner()
    const a = await runner.create()
    const b = await runner.create()
    await runner.exec(b.id, 'echo secret-of-b > /workspace/b.txt')
    const bWorkspace = join(runner.stateDir, 'sandboxes', b.id, 'workspace')
    expect(existsSync(join(bWorkspace, 'b.txt'))).toBe(true)
    const r = await runner.exec(
      a.id,
      [
        `ls ${bWorkspace} >/dev/null 2>&1; echo path=$?`,
        'grep -rsl secret-of-b / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr --exclude-dir=dev; echo search=done',
      ].join('; '),
    )
    expect(r.stdout).toMatch(/path=[12]\n/)
    expect(r.stdout).toBe(r.stdout.replace(/.*secret-of-b.*\n/, ''))
    expect(r.stdout).toMatch(/^path=[12]\nsearch=done\n$/)
    // Same host uid as the runner and as b: only the pid namespace stands between them.
    await runner.request('POST', `/v1/sandboxes/${a.id}/exec`, { command: 'kill -9 -1' }).catch(() => {})
    expect((await runner.request('GET', '/healthz')).status).toBe(200)
    expect((await runner.exec(b.id, 'cat /workspace/b.txt')).stdout).toBe('secret-of-b\n')
  })
})

describe('a rootless runner restarts', () => {
  it('reconnects to its rootless agents; the shell keeps cwd and env', async () => {
    await using runner = await rootlessRunner()
    const sb = await runner.create()
    await runner.exec(sb.id, 'mkdir -p /workspace/kept && cd /workspace/kept && export KEPT=yes', 'default')
    await runner.restart()
    await vi.waitFor(
      async () => {
        const info = SandboxInfo.parse((await runner.request('GET', `/v1/sandboxes/${sb.id}`)).body)
        expect(info.status).toBe('running')
      },
      { timeout: 20_000, interval: 200 },
    )
    expect((await runner.exec(sb.id, 'pwd; echo $KEPT', 'default')).stdout).toBe('/workspace/kept\nyes\n')
  })
})

describe('limits on a runner without cgroups it may manage', () => {
  it('refuses explicit memory, CPU and disk limits with LIMITS_NOT_ENFORCEABLE naming what is missing', async () => {
    await using runner = await rootlessRunner()
    for (const limits of [{ memoryBytes: 256 * 1024 * 1024 }, { cpus: 0.5 }, { diskBytes: 1024 ** 3 }]) {
      const res = await runner.request('POST', '/v1/sandboxes', { limits })
      expect(res.status).toBe(400)
      const { error } = ErrorBody.parse(res.body)
      expect(error.code).toBe('LIMITS_NOT_ENFORCEABLE')
      expect(error.message).toMatch(
        limits.diskBytes
          ? /diskBytes cannot be enforced by a runner that is not root/
          : /cannot be enforced by a runner that is not root without a delegated cgroup v2 subtree \(this host's cgroups are v1.*Delegate=yes/,
      )
    }
    const list = await runner.request('GET', '/v1/sandboxes')
    expect(list.body).toEqual({ sandboxes: [] })
  })

  it('creates a sandbox without limits, enforcing the default pids and saying the rest are not enforced', async () => {
    await using runner = await rootlessRunner()
    expect(runner.err()).toMatch(
      /"level":40.*the namespace driver runs rootless: memory, CPU and disk limits are not enforced/,
    )
    expect(runner.err().match(/runs rootless/g)).toHaveLength(1)
    const sb = await runner.create()
    const info = SandboxInfo.parse((await runner.request('GET', `/v1/sandboxes/${sb.id}`)).body)
    expect(info.isolation).toBe('namespace')
    expect(info.limits).toEqual({ pids: 1024 })
    expect(info.description).toMatch(/rootless.*memory, CPU and disk limits are NOT enforced/)
    expect(info.usage).toBeNull()
  })

  it('stops a fork bomb at its pids limit, and a second sandbox keeps working', async () => {
    await using runner = await rootlessRunner()
    const bomb = await runner.create({ limits: { pids: 48 } })
    const other = await runner.create()
    const r = await runner.exec(
      bomb.id,
      // perl's fork fails at once at the limit (bash would retry for seconds); it kills its children after.
      `perl -e 'my @kids; for (1..200) { my $p = fork(); last unless defined $p; if ($p == 0) { open STDOUT, ">/dev/null"; open STDERR, ">/dev/null"; sleep 60; exit 0 } push @kids, $p } print scalar(@kids), "\\n"; kill "KILL", @kids; waitpid($_, 0) for @kids'`,
    )
    const forked = Number(r.stdout.trim())
    expect(forked).toBeGreaterThan(0)
    expect(forked).toBeLessThan(48)
    expect((await runner.exec(other.id, 'echo unharmed')).stdout).toBe('unharmed\n')
    expect((await runner.exec(bomb.id, 'echo served')).stdout).toBe('served\n')
  })

  it('removes a sandbox whose code locked its own dirs against their owner', async () => {
    await using runner = await rootlessRunner()
    const sb = await runner.create()
    await runner.exec(
      sb.id,
      'mkdir -p /workspace/locked/deep && touch /workspace/locked/deep/f && chmod 0 /workspace/locked/deep /workspace/locked',
    )
    const dir = join(runner.stateDir, 'sandboxes', sb.id)
    expect(existsSync(dir)).toBe(true)
    expect((await runner.request('DELETE', `/v1/sandboxes/${sb.id}`)).status).toBeLessThan(300)
    expect(existsSync(dir)).toBe(false)
  })
})
