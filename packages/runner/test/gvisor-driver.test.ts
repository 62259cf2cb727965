// The gVisor driver with the real runner, real runsc and the real agent. These tests fail (never
// skip) when the host cannot run gVisor sandboxes: runsc comes from apt; the runner must be root.
import { execFileSync } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SandboxInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import { GvisorDriver } from '../src/drivers/gvisor-driver.ts'
import { gvisorRunner } from './gvisor-runner.ts'
import { exec } from './namespace-runner.ts'
import { createSandbox, startRunner, type TestRunner } from './runner-fixture.ts'

const MiB = 1024 * 1024

async function info(runner: TestRunner, id: string): Promise<SandboxInfo> {
  const res = await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })
  return SandboxInfo.parse(res.json())
}

/** The driver state of a sandbox, as the runner stored it. */
function stateOf(runner: TestRunner, id: string): { dir: string; runscRoot: string; socketDir: string } {
  return runner.app.conch.manager.get(id).record.driverState as {
    dir: string
    runscRoot: string
    socketDir: string
  }
}

describe('gvisor driver', () => {
  it('runs a shell at /workspace whose cd and export persist, and says what isolates it', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner)
    const info = SandboxInfo.parse(
      (await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })).json(),
    )
    expect(info).toMatchObject({ driver: 'gvisor', workdir: '/workspace' })
    expect((await exec(runner, id, 'pwd')).stdout).toBe('/workspace\n')
    await exec(runner, id, 'mkdir -p sub && cd sub && export KEPT=yes', 'default')
    expect(await exec(runner, id, 'pwd; echo $KEPT; echo $HOME; id -u', 'default')).toMatchObject({
      stdout: '/workspace/sub\nyes\n/workspace\n1000\n',
      exitCode: 0,
    })
    expect((await exec(runner, id, 'echo "$USER:$LOGNAME:$(whoami)"', 'default')).stdout).toBe(
      'sandbox:sandbox:sandbox\n',
    )
    const kernel = await exec(
      runner,
      id,
      'dmesg 2>&1 | head -1; ls -ld /workspace/sub; stat -c %U /workspace/sub',
    )
    expect(kernel.stdout).toMatch(/gVisor/)
    expect(kernel.stdout).toMatch(/sandbox\n$/)
  })

  it('gives commands pipes for stdout and stderr that they can open by path', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner)
    const byPath = 'echo out > /dev/stdout; echo err > /dev/stderr; printf tee | tee /dev/stderr'
    for (const session of [undefined, 'default']) {
      expect(await exec(runner, id, byPath, session)).toMatchObject({
        stdout: 'out\ntee',
        stderr: 'err\ntee',
        exitCode: 0,
      })
    }
  })

  it('hides host files and keeps system dirs read-only', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner)
    const paths = ['/root', runner.stateDir, '/etc/shadow', '/home']
    const probe = paths.map((p) => `test -e '${p}' && echo 'seen ${p}'`).join('; ')
    expect((await exec(runner, id, `${probe}; true`)).stdout).toBe('')
    const writes = await exec(
      runner,
      id,
      'touch /usr/x 2>&1; touch /etc/x 2>&1; touch /x 2>&1; touch /tmp/x /dev/shm/x && echo ok',
    )
    expect(writes.stdout).toMatch(/\/usr\/x.*(Read-only file system|Permission denied)/)
    expect(writes.stdout).toMatch(/\/etc\/x.*(Read-only file system|Permission denied)/)
    expect(writes.stdout).toMatch(/ok\n$/)
  })

  it('attack: finds neither the agent socket nor the link secret, and cannot write where the runner looks', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner)
    const r = await exec(
      runner,
      id,
      'ls /run/conch 2>&1; cat /run/conch/secret 2>&1; touch /run/conch/agent.sock 2>&1; ln -s /tmp /run/conch/x 2>&1; find / -xdev -type s 2>/dev/null | wc -l',
    )
    expect(r.stdout).toMatch(/ls: cannot open directory '\/run\/conch': Permission denied/)
    expect(r.stdout).toMatch(/cat: \/run\/conch\/secret: Permission denied/)
    expect(r.stdout).toMatch(/touch: cannot touch '\/run\/conch\/agent\.sock': Permission denied/)
    expect(r.stdout).toMatch(/ln: failed to create symbolic link '\/run\/conch\/x': Permission denied/)
    expect(r.stdout).toMatch(/\n0\n$/)
    // The agent deleted the secret file once it read it; only the socket is left.
    expect(readdirSync(stateOf(runner, id).socketDir)).toEqual(['agent.sock'])
    expect((await exec(runner, id, 'echo still-mine')).stdout).toBe('still-mine\n')
  })

  it("attack: cannot signal, ptrace or read the agent's memory, which keeps serving", async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner, { env: { GIVEN: 'by-spec' } })
    const pid = (
      await exec(runner, id, "ps -eo pid=,args= | awk '$2 ~ /node$/ {print $1}' | head -1")
    ).stdout.trim()
    expect(pid).toMatch(/^\d+$/)
    const r = await exec(
      runner,
      id,
      [
        `kill -9 ${pid} 2>&1; echo kill=$?`,
        `kill -STOP ${pid} 2>&1; echo stop=$?`,
        `perl -e '$r = syscall(101, 16, ${pid}, 0, 0); print "attach=$r $!\\n"'`,
        `perl -e 'open(my $m, "<", "/proc/${pid}/mem") or print "mem=$!\\n"'`,
        `grep -E "^Uid" /proc/${pid}/status`,
      ].join('; '),
    )
    expect(r.stdout).toMatch(/kill=1\n/)
    expect(r.stdout).toMatch(/stop=1\n/)
    expect(r.stdout).toMatch(/attach=-1 Operation not permitted\n/)
    expect(r.stdout).toMatch(/mem=Permission denied\n/)
    expect(r.stdout).toMatch(/Uid:\t0\t0\t0\t0/)
    // gVisor shows the agent's environ to the sandbox user (Linux would not); it holds only the
    // sandbox's own environment, never the runner's or the link secret.
    const environ = (await exec(runner, id, `tr "\\0" "\\n" < /proc/${pid}/environ`)).stdout
    expect(environ).toContain('GIVEN=by-spec')
    expect(environ).not.toMatch(/CONCH|[0-9a-f]{64}/)
    expect((await exec(runner, id, 'echo served')).stdout).toBe('served\n')
  })

  it('has no network egress: a host listener on 127.0.0.1 is unreachable', async () => {
    await using runner = await gvisorRunner()
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
        `timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/${port}' 2>&1; echo "rc=$?"; cat /proc/net/dev`,
      )
      expect(result.stdout).toMatch(/Connection refused/)
      expect(result.stdout).not.toMatch(/rc=0/)
      expect(result.stdout).not.toMatch(/eth|ens|enp/)
      expect(connections).toBe(0)
    } finally {
      server.close()
    }
  })

  it('attack: a fork bomb stops at the pids limit while its agent, the runner and other sandboxes stay fine', async () => {
    await using runner = await gvisorRunner()
    const bombed = await createSandbox(runner, { limits: { pids: 64 } })
    const other = await createSandbox(runner)
    const bomb = await exec(
      runner,
      bombed,
      `sh -c 'for i in $(seq 200); do sleep 5 >/dev/null 2>&1 & done; echo done' 2>&1; echo "rc=$?"`,
    )
    expect(bomb.stdout).toMatch(/Resource temporarily unavailable|Cannot fork/)
    expect(bomb.stdout).not.toMatch(/rc=0/)
    expect((await exec(runner, bombed, 'echo alive')).stdout).toBe('alive\n')
    expect((await info(runner, bombed)).status).toBe('running')
    expect((await exec(runner, other, 'echo fine')).stdout).toBe('fine\n')
    expect((await runner.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
  }, 60_000)

  it('attack: a memory hog is killed alone with SIGKILL and counted; the agent, the shell and its state survive', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner, { limits: { memoryBytes: 128 * MiB } })
    await exec(runner, id, 'export KEPT=yes; cd /tmp', 'default')
    const hog = await exec(
      runner,
      id,
      `perl -e '$x = "a" x (512 * 1024 * 1024); print "survived\\n"' 2>&1`,
      'default',
    )
    expect(hog.stdout).not.toContain('survived')
    expect(hog).toMatchObject({ exitCode: 137, oomKilled: true })
    expect(await exec(runner, id, 'echo $KEPT $(pwd)', 'default')).toMatchObject({ stdout: 'yes /tmp\n' })
    const after = await info(runner, id)
    expect(after.status).toBe('running')
    expect(after.usage?.oomKills).toBe(1)
    // A process that lowers its own limit gets NULL back, as without the preload: no kill.
    const own = await exec(
      runner,
      id,
      `ulimit -v 65536; perl -e '$x = "a" x (512 * 1024 * 1024); print "survived\\n"' 2>&1; echo "rc=$?"`,
    )
    expect(own.stdout).toMatch(/Out of memory/)
    expect(own.stdout).not.toMatch(/rc=137/)
    expect((await info(runner, id)).usage?.oomKills).toBe(1)
  })

  it('reports usage on GET and /metrics: memory grows while a process holds it, processes are counted inside gVisor', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner, { limits: { memoryBytes: 512 * MiB } })
    const before = (await info(runner, id)).usage
    expect(before).toMatchObject({ oomKills: 0 })
    expect(before?.cpuSeconds).toBeGreaterThan(0)
    await exec(
      runner,
      id,
      `perl -e '$x = "a" x (200 * 1024 * 1024); open(my $f, ">", "/tmp/held") or die; close $f; sleep 600' > /dev/null 2>&1 &
       sleep 600 > /dev/null 2>&1 &`,
      'default',
    )
    await expect
      .poll(async () => (await exec(runner, id, 'test -e /tmp/held && echo y')).stdout, { timeout: 30_000 })
      .toBe('y\n')
    const after = (await info(runner, id)).usage
    expect(after?.memoryBytes).toBeGreaterThan((before?.memoryBytes ?? 0) + 150 * MiB)
    expect(after?.memoryPeakBytes).toBeGreaterThanOrEqual(after?.memoryBytes ?? 0)
    // The count is gVisor's (the agent, its shell and the two sleepers among a few more), not
    // the hundreds of host tasks the sentry and its stubs use.
    expect(after?.pids).toBeGreaterThanOrEqual((before?.pids ?? 0) + 2)
    expect(after?.pids).toBeLessThan(50)
    const metrics = await runner.app.inject({ method: 'GET', url: '/metrics', headers: runner.auth })
    const line = metrics.body
      .split('\n')
      .find((l) => l.startsWith(`conch_sandbox_memory_bytes{sandbox="${id}"}`))
    expect(Number(line?.split(' ')[1])).toBeGreaterThan(150 * MiB)
  })

  it('attack: a forged, oversized OOM counter cannot stall or crash the runner reading usage', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner, { limits: { memoryBytes: 128 * MiB } })
    const forged = await exec(
      runner,
      id,
      'printf "oom_kill 99999999999999999999999\\n" > /run/conch-oom-events && head -c 20000000 /dev/zero >> /run/conch-oom-events; echo rc=$?',
    )
    expect(forged.stdout).toBe('rc=0\n')
    const res = await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })
    expect(res.statusCode).toBe(200)
    // The runner reads only the file's first bytes and clamps what it finds.
    expect(SandboxInfo.parse(res.json()).usage?.oomKills).toBe(Number.MAX_SAFE_INTEGER)
    expect((await exec(runner, id, 'echo served')).stdout).toBe('served\n')
  })

  it("answers GET and /metrics while a sandbox's kernel does not answer runsc, with the host's process count", async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner)
    const state = stateOf(runner, id)
    const sentry = z
      .object({ pid: z.number().int().positive() })
      .parse(
        JSON.parse(execFileSync('runsc', ['--root', state.runscRoot, 'state', id], { encoding: 'utf8' })),
      )
    // A stopped sentry stands in for a kernel kept busy by its sandbox's code.
    process.kill(sentry.pid, 'SIGSTOP')
    try {
      const res = await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })
      expect(res.statusCode).toBe(200)
      // The host cgroup's count: the sentry's threads, more than gVisor would report.
      expect(SandboxInfo.parse(res.json()).usage?.pids).toBeGreaterThan(20)
      const metrics = await runner.app.inject({ method: 'GET', url: '/metrics', headers: runner.auth })
      expect(metrics.statusCode).toBe(200)
    } finally {
      process.kill(sentry.pid, 'SIGCONT')
    }
    expect((await exec(runner, id, 'echo served')).stdout).toBe('served\n')
  }, 60_000)

  it('attack: processes that together exceed the memory limit are stopped in their own sandbox, which reports it', async () => {
    await using runner = await gvisorRunner()
    const hogged = await createSandbox(runner, { limits: { memoryBytes: 128 * MiB } })
    const other = await createSandbox(runner)
    // Each hog stays under the per-process limit; together they pass the sandbox's memory
    // cgroup. The hogs hold their memory until they are killed, so even on a loaded host, where
    // they start one by one, they come to hold it all at once. Two outcomes keep the limit, and
    // which one comes depends on who meets the full cgroup first: gVisor's own allocation fails,
    // and the preload kills each hog alone and counts it; or the host's OOM killer acts, and kills
    // gVisor's kernel (the whole sandbox) or a ptrace stub (that hog).
    const hog = `perl -e '$x = "a" x (96 * 1024 * 1024); sleep 600'`
    let execEnded = false
    const hogging = runner.app
      .inject({
        method: 'POST',
        url: `/v1/sandboxes/${hogged}/exec`,
        headers: runner.auth,
        payload: { command: `for i in 1 2 3 4 5 6; do ${hog} & done; wait` },
      })
      .finally(() => {
        execEnded = true
      })
    // Either way the attack ends: the exec returns once no hog is left, or the sandbox is dead.
    await vi.waitFor(
      async () => {
        if (!execEnded && (await info(runner, hogged)).status !== 'dead')
          throw new Error('the hogs still run')
      },
      { timeout: 80_000, interval: 250 },
    )
    await hogging
    // Which end came: the sandbox still serves, having killed hogs and counted them; or it died
    // whole, at once or a moment after the hogs' exec returned, saying why.
    const before = await info(runner, hogged)
    const probe = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${hogged}/exec`,
      headers: runner.auth,
      payload: { command: 'echo alive' },
    })
    if (probe.statusCode === 200) {
      expect(probe.json().stdout).toBe('alive\n')
      expect(before.usage?.oomKills).toBeGreaterThan(0)
    } else {
      expect(probe.json().error.code).toBe('SANDBOX_NOT_RUNNING')
      const after = await info(runner, hogged)
      expect(after.status).toBe('dead')
      expect(after.deadReason).toMatch(/exceeding its memory limit/)
    }
    expect((await exec(runner, other, 'echo fine')).stdout).toBe('fine\n')
    expect((await runner.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
  }, 90_000)

  it('reconnects to the agent after a runner restart; the shell keeps cwd and env', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-gv-restart-'))
    let id: string
    {
      await using first = await gvisorRunner({ stateDir, keepAgents: true, removeStateDir: false })
      id = await createSandbox(first)
      await exec(first, id, 'cd /tmp && export KEPT=yes', 'default')
    }
    await using second = await gvisorRunner({ stateDir, removeStateDir: true })
    expect((await info(second, id)).status).toBe('running')
    expect((await exec(second, id, 'pwd; echo $KEPT', 'default')).stdout).toBe('/tmp\nyes\n')
  })

  it('refuses to create a sandbox without runsc, saying how to install it', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-gv-missing-'))
    const driver = new GvisorDriver({ stateDir, runscPath: join(stateDir, 'no-runsc') })
    expect(driver.problem()).toMatch(/runsc is not installed .*; apt-get install runsc$/)
    await using runner = await startRunner({ stateDir, driver, removeStateDir: true })
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    expect(res.json()).toMatchObject({ error: { code: 'AGENT_UNAVAILABLE' } })
    expect(res.json().error.message).toMatch(/apt-get install runsc/)
  })

  it('runs from an image directory: the sandbox sees the image, not the host', async () => {
    // A minimal image: hard links to the host's programs and libraries, and its own /etc.
    const image = mkdtempSync(join(tmpdir(), 'conch-gv-image-'))
    chmodSync(image, 0o755)
    mkdirSync(join(image, 'etc'))
    writeFileSync(join(image, 'etc', 'image-marker'), 'from-image\n')
    mkdirSync(join(image, 'usr', 'lib'), { recursive: true })
    for (const dir of ['bin', 'lib64', 'lib/x86_64-linux-gnu'])
      execFileSync('cp', ['-al', `/usr/${dir}`, join(image, 'usr', dir)])
    for (const dir of ['bin', 'lib', 'lib64']) symlinkSync(`usr/${dir}`, join(image, dir))
    try {
      await using runner = await gvisorRunner({ rootfs: image })
      const id = await createSandbox(runner)
      const r = await exec(
        runner,
        id,
        'cat /etc/image-marker; test -e /etc/os-release && echo host-etc; id -un; pwd',
      )
      expect(r.stdout).toBe('from-image\nsandbox\n/workspace\n')
    } finally {
      rmSync(image, { recursive: true, force: true })
    }
  })

  it('destroys a sandbox: no container in runsc list, no folder, no mount, no cgroup', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner, { limits: { diskBytes: 64 * MiB } })
    const state = stateOf(runner, id)
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).toContain(state.dir)
    const res = await runner.app.inject({
      method: 'DELETE',
      url: `/v1/sandboxes/${id}`,
      headers: runner.auth,
    })
    expect(res.statusCode).toBeLessThan(300)
    const list = execFileSync('runsc', ['--root', state.runscRoot, 'list', '-quiet'], { encoding: 'utf8' })
    expect(list).not.toContain(id)
    expect(existsSync(state.dir)).toBe(false)
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(state.dir)
    const cgroups = readdirSync('/sys/fs/cgroup').filter((c) =>
      existsSync(join('/sys/fs/cgroup', c, 'conch-gvisor', id)),
    )
    expect(cgroups).toEqual([])
  })
})
