// Credential injection end to end: curl and Python in a namespace sandbox reach `api.test` (a
// loopback HTTPS host that reflects requests, its certificate from a test CA the runner is told
// to trust) through the runner's proxy, which adds the operator's Authorization header. The
// sandbox is the adversary looking for the secret: in its environment, in every process's
// environ and command line, in its files, in what the host reflects, and through the API with
// its own token.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EgressCredentials } from '../../src/egress-credentials.ts'
import { tableResolver } from '../../src/egress-resolver.ts'
import { httpsHost, type TestHost, testCa } from '../egress/credential-servers.ts'
import { exec, nsRunner } from '../namespace-runner.ts'
import { createSandbox, type TestRunnerOptions } from '../runner-fixture.ts'

const SECRET = 'Bearer sk-live-sandbox-9f8e7d6c5b4a'
let api: TestHost
let network: NonNullable<TestRunnerOptions['network']>

beforeAll(async () => {
  const publicCa = await testCa('publicca')
  api = await httpsHost(publicCa, 'api.test')
  network = {
    allowPublicPorts: false,
    previewDomain: null,
    egressPermit: ['127.0.0.1/32'],
    egressResolver: tableResolver({ 'api.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }),
    egressCredentials: EgressCredentials.parse(
      JSON.stringify({ api: { host: 'api.test', headers: { Authorization: SECRET } } }),
    ),
    egressUpstreamCa: [publicCa.certPem],
  }
})
afterAll(() => api.close())

describe('egress credentials inside a sandbox', () => {
  it('injects the header for curl and Python, and the sandbox finds the secret nowhere', async () => {
    await using runner = await nsRunner({ listen: true, network })
    const policy = { egress: { allow: [`api.test:${api.port}`], credentials: ['api'] } }
    const id = await createSandbox(runner, { network: policy })
    const before = api.seen.length
    const r = await exec(
      runner,
      id,
      [
        `curl -s https://api.test:${api.port}/curl; echo " curl=$?"`,
        `python3 -c "import urllib.request as u; print(u.urlopen('https://api.test:${api.port}/py').read().decode())"`,
        // `sk-li[v]e` matches the secret but not its own text, so grep never finds itself.
        'env | grep -c "sk-li[v]e"; echo "env"',
        'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | grep -ac "sk-li[v]e"; echo "proc"',
        'grep -rl "sk-li[v]e" /workspace /tmp /etc /run 2>/dev/null | wc -l; echo "files"',
        'grep -rl "PRIVATE KEY" /workspace /tmp /run 2>/dev/null | wc -l; echo "keys"',
        'grep -c "BEGIN CERTIFICATE" /workspace/.conch/egress-ca.pem',
      ].join('; '),
    )
    expect(api.seen.length).toBe(before + 2)
    expect(api.seen.slice(-2).map((h) => h.authorization)).toEqual([SECRET, SECRET])
    expect(r.stdout).toContain('"authorization":"[redacted]"')
    expect(r.stdout).toContain(' curl=0\n')
    expect(r.stdout, r.stderr.slice(-300)).toContain('"url":"/py"')
    expect(r.stdout).not.toContain('sk-live')
    expect(r.stdout).toContain('0\nenv\n0\nproc\n0\nfiles\n0\nkeys\n1\n')
    const info = await runner.app.inject({ url: `/v1/sandboxes/${id}`, headers: runner.auth })
    expect(info.body).not.toContain('sk-live')
  })

  it('refuses credentials from a sandbox token, an unknown name, and a host off the allowlist', async () => {
    await using runner = await nsRunner({ network })
    const id = await createSandbox(runner)
    const token = (
      await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/tokens`,
        headers: runner.auth,
        payload: {},
      })
    ).json().token as string
    const create = (authorization: string, egress: unknown) =>
      runner.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        headers: { authorization },
        payload: { network: { egress } },
      })
    const byToken = await create(`Bearer ${token}`, { allow: ['api.test'], credentials: ['api'] })
    expect(byToken.statusCode).toBe(403)
    const unknown = await create(runner.auth.authorization, { allow: ['api.test'], credentials: ['nope'] })
    expect(unknown.statusCode).toBe(400)
    expect(unknown.json().error.message).toContain('no egress credential named "nope"')
    const offList = await create(runner.auth.authorization, { allow: ['other.test'], credentials: ['api'] })
    expect(offList.statusCode).toBe(400)
    expect(offList.json().error.message).toContain('not on this sandbox')
    expect(offList.body).not.toContain('sk-live')
    expect(runner.app.conch.manager.list().map((s) => s.id)).toEqual([id])
  })

  it('presents the same CA after a runner restart, so the sandbox’s trust keeps working', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-egress-ca-'))
    let id = ''
    {
      await using first = await nsRunner({ listen: true, network, stateDir, keepAgents: true })
      id = await createSandbox(first, {
        network: { egress: { allow: [`api.test:${api.port}`], credentials: ['api'] } },
      })
    }
    await using second = await nsRunner({ listen: true, network, stateDir, removeStateDir: true })
    const r = await exec(
      second,
      id,
      `curl -s -o /dev/null -w "%{http_code}" https://api.test:${api.port}/again`,
    )
    expect(r.stdout).toBe('200')
    expect(api.seen.at(-1)?.authorization).toBe(SECRET)
  })
})
