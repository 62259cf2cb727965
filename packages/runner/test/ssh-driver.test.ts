// The ssh driver against a real OpenSSH server on 127.0.0.1 (sshd-fixture.ts): the conformance
// table, a connection killed mid-run, a runner restart, and the attacks on its configuration:
// a host with the wrong key, a request naming a host the operator never configured or giving
// an address, and a look for host secrets in every answer.
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ErrorBody, ProcessInfo, SandboxInfo } from '@conch/protocol'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { descendantsOf } from '../src/drivers/proc-stat.ts'
import { SshDriver } from '../src/drivers/ssh-driver.ts'
import type { SshHost } from '../src/drivers/ssh-hosts.ts'
import { casesFor } from './driver-conformance.ts'
import { hostTarget } from './host-driver-target.ts'
import { createSandbox, startRunner } from './runner-fixture.ts'
import { cli } from './runner-process.ts'
import { startSshd, type TestSshd } from './sshd-fixture.ts'

let sshd: TestSshd
const drivers: SshDriver[] = []

/** An ssh driver over the test sshd, with `hosts` (by default one host `box`), using the runner's own Node there. */
function sshDriver(hosts?: Record<string, SshHost>): SshDriver {
  const driver = new SshDriver({
    hosts: new Map(Object.entries(hosts ?? { box: sshd.host({ nodePath: process.execPath }) })),
  })
  drivers.push(driver)
  return driver
}

beforeAll(async () => {
  sshd = await startSshd()
}, 60_000)

afterAll(async () => {
  for (const driver of drivers) driver.close()
  await sshd?.[Symbol.asyncDispose]()
})

describe('ssh driver conformance', () => {
  const target = hostTarget('ssh', [], () => sshDriver())
  for (const c of casesFor(target)) it(c.name, () => c.run(target), c.timeoutMs)
})

/** Kills every connection the test sshd serves (each is a child process of the listener). */
function killSshConnections(): number {
  const children = descendantsOf(sshd.pid)
  for (const pid of children) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // gone
    }
  }
  return children.length
}

describe('ssh driver', () => {
  it('loses no output and no shell state when the SSH connection is killed mid-run', async () => {
    await using runner = await startRunner({ driver: sshDriver() })
    const id = await createSandbox(runner)
    const inject = (method: 'GET' | 'POST', url: string, payload?: object) =>
      runner.app.inject({
        method,
        url: `/v1/sandboxes/${id}${url}`,
        headers: runner.auth,
        ...(payload ? { payload } : {}),
      })
    const set = await inject('POST', '/exec', {
      command: 'cd /tmp && export MARK=kept',
      sessionId: 'default',
    })
    expect(set.statusCode).toBe(200)
    // Prints 10 lines, waits for a gate file, then prints 20 more: the connection dies in between.
    const workdir = SandboxInfo.parse((await inject('GET', '')).json()).workdir
    const gate = `${workdir}/gate`
    const started = ProcessInfo.parse(
      (
        await inject('POST', '/processes', {
          command: `for i in $(seq 1 30); do echo line$i; if [ $i = 10 ]; then while [ ! -e ${gate} ]; do sleep 0.02; done; fi; done`,
        })
      ).json(),
    )
    await vi.waitFor(
      async () => {
        const out = (await inject('GET', `/processes/${started.id}/output?since=0`)).json() as {
          stdout: string
        }
        expect(out.stdout).toContain('line10\n')
      },
      { timeout: 30_000, interval: 20 },
    )
    expect(killSshConnections()).toBeGreaterThan(0)
    writeFileSync(gate, '')
    // A call in flight on the dropped link fails with CONNECTION_LOST; like the SDK, try again.
    const retried = (method: 'GET' | 'POST', url: string, payload?: object) =>
      vi.waitFor(
        async () => {
          const res = await inject(method, url, payload)
          expect(res.statusCode).not.toBe(503)
          return res
        },
        { timeout: 10_000, interval: 100 },
      )
    const waited = ProcessInfo.parse((await retried('POST', `/processes/${started.id}/wait`, {})).json())
    expect(waited.status).toBe('exited')
    const out = (await retried('GET', `/processes/${started.id}/output?since=0`)).json() as { stdout: string }
    expect(out.stdout).toBe(Array.from({ length: 30 }, (_, i) => `line${i + 1}\n`).join(''))
    const after = await retried('POST', '/exec', { command: 'echo "$PWD $MARK"', sessionId: 'default' })
    expect(after.json()).toMatchObject({ stdout: '/tmp kept\n', exitCode: 0 })
  }, 120_000)

  it('destroy stops the remote agent and removes its folder', async () => {
    await using runner = await startRunner({ driver: sshDriver() })
    const id = await createSandbox(runner)
    const record = runner.app.conch.manager.get(id).record
    const state = record.driverState as { dir: string; pid: number }
    expect(existsSync(`${state.dir}/conch-agent.mjs`)).toBe(true)
    expect(existsSync(`/proc/${state.pid}`)).toBe(true)
    const res = await runner.app.inject({
      method: 'DELETE',
      url: `/v1/sandboxes/${id}`,
      headers: runner.auth,
    })
    expect(res.statusCode).toBeLessThan(300)
    expect(existsSync(state.dir)).toBe(false)
    expect(
      existsSync(`/proc/${state.pid}`) && !readFileSync(`/proc/${state.pid}/stat`, 'utf8').includes(') Z'),
    ).toBe(false)
  }, 60_000)

  it('keeps the link secret off the remote command line and out of the remote folder', async () => {
    await using runner = await startRunner({ driver: sshDriver() })
    const id = await createSandbox(runner, { env: { TOKEN: 'env-value-secret' } })
    const state = runner.app.conch.manager.get(id).record.driverState as {
      dir: string
      pid: number
      linkSecret: string
    }
    const cmdline = readFileSync(`/proc/${state.pid}/cmdline`, 'utf8')
    expect(cmdline).not.toContain(state.linkSecret)
    expect(cmdline).not.toContain('env-value-secret')
    expect(existsSync(`${state.dir}/link-secret`)).toBe(false)
    expect(existsSync(`${state.dir}/agent.env`)).toBe(false)
    const log = readFileSync(`${state.dir}/agent.log`, 'utf8')
    expect(log).not.toContain(state.linkSecret)
  }, 60_000)
})

describe('ssh driver attacks', () => {
  it("attack: sandbox code under the remote's bubblewrap cannot write the host's files, see its processes or share its /tmp", async () => {
    await using runner = await startRunner({ driver: sshDriver() })
    const id = await createSandbox(runner)
    const info = SandboxInfo.parse(
      (await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })).json(),
    )
    expect(info.isolation).toBe('namespace')
    const marker = `/var/tmp/conch-escape-${id}`
    const exec = async (command: string) =>
      (
        await runner.app.inject({
          method: 'POST',
          url: `/v1/sandboxes/${id}/exec`,
          headers: runner.auth,
          payload: { command },
        })
      ).json() as { stdout: string; exitCode: number }
    expect((await exec(`echo x > ${marker}`)).exitCode).not.toBe(0)
    expect(existsSync(marker)).toBe(false)
    expect((await exec(`kill -0 ${sshd.pid} 2>/dev/null && echo seen || echo hidden`)).stdout).toBe(
      'hidden\n',
    )
    expect((await exec(`echo inside > /tmp/conch-ssh-${id}`)).exitCode).toBe(0)
    expect(existsSync(join(tmpdir(), `conch-ssh-${id}`))).toBe(false)
    expect((await exec('echo kept > kept.txt && cat kept.txt')).stdout).toBe('kept\n')
    expect(existsSync(`${info.workdir}/kept.txt`)).toBe(true)
  }, 60_000)

  it('refuses a host whose key is not the one in known_hosts, before logging in', async () => {
    const driver = sshDriver({
      box: sshd.host({ nodePath: process.execPath, knownHostsFile: sshd.wrongKnownHosts }),
    })
    await using runner = await startRunner({ driver })
    const before = readFileSync(`${sshd.dir}/authorized_keys`, 'utf8')
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    const error = ErrorBody.parse(res.json()).error
    expect(error.code).toBe('SSH_HOST_KEY_REJECTED')
    expect(res.statusCode).toBe(502)
    expect(existsSync(`${sshd.dir}/remote`) && runner.app.conch.manager.list().length).toBeFalsy()
    expect(readFileSync(`${sshd.dir}/authorized_keys`, 'utf8')).toBe(before)
  }, 60_000)

  it('refuses a host missing from known_hosts', async () => {
    const driver = sshDriver({
      box: sshd.host({ nodePath: process.execPath, knownHostsFile: `${sshd.dir}/absent` }),
    })
    await using runner = await startRunner({ driver })
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    expect(ErrorBody.parse(res.json()).error.code).toBe('SSH_HOST_KEY_REJECTED')
  }, 60_000)

  it('refuses a create naming a host the operator did not configure, or an address', async () => {
    const driver = sshDriver({
      box: sshd.host({ nodePath: process.execPath }),
      other: sshd.host({ nodePath: process.execPath }),
    })
    await using runner = await startRunner({ driver })
    const create = (payload: object) =>
      runner.app.inject({ method: 'POST', url: '/v1/sandboxes', headers: runner.auth, payload })
    const unknown = ErrorBody.parse((await create({ host: 'nope' })).json()).error
    expect(unknown.code).toBe('SSH_HOST_UNKNOWN')
    expect(unknown.details).toEqual({ hosts: ['box', 'other'] })
    const none = ErrorBody.parse((await create({})).json()).error
    expect(none.code).toBe('SSH_HOST_UNKNOWN')
    for (const host of ['127.0.0.1', 'root@127.0.0.1:22', '../box', 'BOX']) {
      const res = await create({ host })
      expect(res.statusCode).toBe(400)
      expect(ErrorBody.parse(res.json()).error.code).toBe('BAD_REQUEST')
    }
    expect(runner.app.conch.manager.list()).toEqual([])
  }, 60_000)

  it('refuses a host on a driver that runs on the runner host', async () => {
    await using runner = await startRunner()
    const res = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { host: 'box' },
    })
    expect(ErrorBody.parse(res.json()).error.code).toBe('BAD_REQUEST')
  })

  it('never shows a host address, user, key path or key in the API', async () => {
    await using runner = await startRunner({ driver: sshDriver() })
    const id = await createSandbox(runner)
    const answers = [
      await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth }),
      await runner.app.inject({ method: 'GET', url: '/v1/sandboxes', headers: runner.auth }),
    ].map((r) => r.body)
    const key = readFileSync(`${sshd.dir}/user_key`, 'utf8')
    const keyBody = key.split('\n')[1] ?? ''
    for (const body of answers) {
      expect(body).toContain(id)
      for (const secret of ['user_key', 'known_hosts', keyBody, '127.0.0.1']) {
        expect(body).not.toContain(secret)
      }
      // The port as a number of its own (timestamps may contain its digits).
      expect(body).not.toMatch(new RegExp(`(?<!\\d)${sshd.port}(?!\\d)`))
    }
  }, 60_000)
})

describe('ssh driver with its host gone', () => {
  it('forgets a destroyed sandbox and says what it left on a host it cannot reach', async () => {
    const gone = await startSshd()
    const driver = new SshDriver({ hosts: new Map([['gone', gone.host({ nodePath: process.execPath })]]) })
    drivers.push(driver)
    await using runner = await startRunner({ driver })
    const id = await createSandbox(runner)
    const state = runner.app.conch.manager.get(id).record.driverState as { dir: string; pid: number }
    try {
      for (const pid of descendantsOf(gone.pid)) process.kill(pid, 'SIGKILL')
      process.kill(gone.pid, 'SIGKILL')
      // Reaching it fails, and says so without the host's address or port.
      // (A call on the link that was open when the host went away fails with CONNECTION_LOST first.)
      let unreachable = { code: 'CONNECTION_LOST', message: '' }
      for (let attempt = 0; unreachable.code === 'CONNECTION_LOST' && attempt < 20; attempt++) {
        const ran = await runner.app.inject({
          method: 'POST',
          url: `/v1/sandboxes/${id}/exec`,
          headers: runner.auth,
          payload: { command: 'true' },
        })
        unreachable = ErrorBody.parse(ran.json()).error
      }
      expect(unreachable.code).toBe('AGENT_UNAVAILABLE')
      expect(unreachable.message).toMatch(/SSH host "gone"/)
      expect(unreachable.message).not.toContain('127.0.0.1')
      expect(unreachable.message).not.toMatch(new RegExp(`(?<!\\d)${gone.port}(?!\\d)`))
      const res = await runner.app.inject({
        method: 'DELETE',
        url: `/v1/sandboxes/${id}`,
        headers: runner.auth,
      })
      const error = ErrorBody.parse(res.json()).error
      expect(error.code).toBe('AGENT_UNAVAILABLE')
      expect(error.message).toContain(
        `could not be reached to stop its agent (pid ${state.pid}) and remove ${state.dir}`,
      )
      expect(runner.app.conch.manager.list()).toEqual([])
    } finally {
      // The host is gone for the runner, not for this machine: end the agent's tree here.
      // A process of the tree may exit between the listing and its kill (ESRCH): it is gone either way.
      for (const pid of [state.pid, ...descendantsOf(state.pid)]) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // Gone already (ESRCH).
        }
      }
      rmSync(gone.dir, { recursive: true, force: true })
    }
  }, 60_000)
})

describe('ssh driver on a host without Node 22', () => {
  it("uploads the runner's own Node once per host when the remote's is too old", async () => {
    // A remote whose only node says it is v20: a bin dir first on the session's PATH.
    const bin = mkdtempSync(join(tmpdir(), 'conch-old-node-'))
    writeFileSync(join(bin, 'node'), '#!/bin/sh\necho v20.0.0\n', { mode: 0o755 })
    await using oldNode = await startSshd({ env: { PATH: `${bin}:/usr/bin:/bin` } })
    try {
      const driver = new SshDriver({ hosts: new Map([['old', oldNode.host()]]) })
      drivers.push(driver)
      await using runner = await startRunner({ driver })
      const first = await createSandbox(runner)
      const second = await createSandbox(runner)
      const nodeOf = (id: string) =>
        (runner.app.conch.manager.get(id).record.driverState as { node: string }).node
      expect(nodeOf(first)).toMatch(new RegExp(`^${oldNode.dir}/remote/node/node-${process.version}-`))
      expect(nodeOf(second)).toBe(nodeOf(first))
      const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex')
      expect(sha(nodeOf(first))).toBe(sha(process.execPath))
      const ran = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${first}/exec`,
        headers: runner.auth,
        payload: { command: 'echo ok' },
      })
      expect(ran.json()).toMatchObject({ stdout: 'ok\n', exitCode: 0 })
    } finally {
      rmSync(bin, { recursive: true, force: true })
    }
  }, 180_000)
})

describe('conch runner --ssh-hosts', () => {
  it('serves ssh sandboxes from a hosts file, as root without --unsafe-local, and logs no host secret', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-ssh-cli-'))
    try {
      const hostsFile = join(dir, 'hosts.json')
      writeFileSync(hostsFile, JSON.stringify({ hosts: { box: sshd.host({ nodePath: process.execPath }) } }))
      const apiKey = 'k'.repeat(32)
      await using runner = cli(
        [
          'runner',
          '--port',
          '0',
          '--state-dir',
          join(dir, 'state'),
          '--drivers',
          'ssh',
          '--ssh-hosts',
          hostsFile,
          '--log-format',
          'json',
          '--log-level',
          'debug',
        ],
        { CONCH_API_KEY: apiKey },
      )
      const [, url] = await runner.waitFor(/listening on (http:\/\/\S+)/)
      const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
      const created = await fetch(`${url}/v1/sandboxes`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ host: 'box' }),
      })
      const info = SandboxInfo.parse(await created.json())
      // This host has a working bubblewrap, so the sandbox says it got namespaces, and what not.
      expect(info).toMatchObject({ driver: 'ssh', isolation: 'namespace' })
      expect(info.description).toMatch(/bubblewrap.*run as the host's SSH user/)
      const ran = await fetch(`${url}/v1/sandboxes/${info.id}/exec`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ command: 'echo on-$(uname -s)' }),
      })
      expect(await ran.json()).toMatchObject({ stdout: 'on-Linux\n', exitCode: 0 })
      const gone = await fetch(`${url}/v1/sandboxes/${info.id}`, { method: 'DELETE', headers })
      expect(gone.status).toBeLessThan(300)
      const key = readFileSync(`${sshd.dir}/user_key`, 'utf8').split('\n')[1] ?? ''
      const log = runner.out() + runner.err()
      expect(log).toContain(info.id)
      for (const secret of [key, 'user_key', 'known_hosts', 'root@']) expect(log).not.toContain(secret)
      expect(log).not.toMatch(new RegExp(`(?<!\\d)${sshd.port}(?!\\d)`))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)
})
