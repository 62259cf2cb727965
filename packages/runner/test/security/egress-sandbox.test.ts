// Egress end to end: a program in a namespace sandbox uses the HTTP_PROXY the runner set, its
// connection reaches the runner through the agent, and the allowlist decides. The "internet" is
// a server on this host's loopback that the test resolver names `outside.test`; the operator
// permit opens 127.0.0.1/32 for it, and the runner's own port stays refused.

import { mkdtempSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { tableResolver } from '../../src/egress-resolver.ts'
import { exec, nsRunner } from '../namespace-runner.ts'
import { baseUrl, createSandbox, startRunner } from '../runner-fixture.ts'

let outside: Server
let port = 0
let slowAnswered = false

beforeAll(async () => {
  outside = createServer((req, res) => {
    // An answer that comes after the program gave up waiting.
    if (req.url === '/slow') {
      setTimeout(() => {
        slowAnswered = true
        res.end('late')
      }, 3_000)
      return
    }
    res.end(`outside ${req.url}`)
  })
  await new Promise<void>((resolve) => outside.listen(0, '127.0.0.1', resolve))
  port = (outside.address() as AddressInfo).port
})
afterAll(() => outside.close())

const network = {
  allowPublicPorts: false,
  previewDomain: null,
  egressPermit: ['127.0.0.1/32'],
  egressResolver: tableResolver({ 'outside.test': ['127.0.0.1'], 'meta.test': ['169.254.169.254'] }),
}

describe('egress from inside a sandbox', () => {
  it('reaches a listed name through the proxy and nothing else, with or without it', async () => {
    await using runner = await nsRunner({ listen: true, network })
    const runnerPort = Number(new URL(baseUrl(runner.app)).port)
    const id = await createSandbox(runner, {
      network: { egress: { allow: [`outside.test:${port}`, `outside.test:${runnerPort}`, 'meta.test'] } },
    })
    const r = await exec(
      runner,
      id,
      [
        'echo "proxy=$HTTP_PROXY"',
        `curl -s http://outside.test:${port}/plain; echo " plain=$?"`,
        `curl -s -p http://outside.test:${port}/tunnel; echo " tunnel=$?"`,
        `curl -s -o /dev/null -w "%{http_code}" http://evil.test:${port}/; echo " evil"`,
        `curl -s -o /dev/null -w "%{http_code}" --noproxy '' -x "$HTTP_PROXY" http://127.0.0.1:${port}/; echo " literal"`,
        `curl -s -o /dev/null -w "%{http_code}" --noproxy '' -x "$HTTP_PROXY" "http://[::1]:${port}/"; echo " v6"`,
        `curl -s -o /dev/null -w "%{http_code}" --max-time 5 http://127.0.0.1:${port}/; echo " no-proxy"`,
        `curl -s -o /dev/null -w "%{http_code}" http://meta.test/latest/; echo " metadata"`,
        `curl -s -o /dev/null -w "%{http_code}" http://outside.test:${runnerPort}/healthz; echo " runner"`,
        `curl -s --noproxy '*' --max-time 5 http://outside.test:${port}/; echo " direct=$?"`,
        `(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null; echo "raw=$?"`,
      ].join('; '),
    )
    expect(r.stdout).toContain('proxy=http://127.0.0.1:3128\n')
    expect(r.stdout).toContain('outside /plain plain=0\n')
    expect(r.stdout).toContain('outside /tunnel tunnel=0\n')
    expect(r.stdout).toContain('403 evil\n')
    expect(r.stdout).toContain('403 literal\n')
    expect(r.stdout).toContain('403 v6\n')
    expect(r.stdout).toContain('000 no-proxy\n')
    expect(r.stdout).toContain('403 metadata\n')
    expect(r.stdout).toContain('403 runner\n')
    expect(r.stdout).toMatch(/ direct=(6|7)\n/)
    expect(r.stdout).toContain('raw=1\n')
    const metrics = await (await fetch(`${baseUrl(runner.app)}/metrics`, { headers: runner.auth })).text()
    expect(metrics).toMatch(/conch_egress_bytes_total\{direction="in"\} [1-9]/)
    expect(metrics).toMatch(/conch_egress_bytes_total\{direction="out"\} [1-9]/)
    // The agent's own egress listener is not a sandbox port: no credential relays to it.
    const relayed = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/ports/3128/`, {
      headers: runner.auth,
    })
    expect(relayed.status).toBe(403)
    expect(((await relayed.json()) as { error: { code: string } }).error.code).toBe('FORBIDDEN')
  })

  it('survives a program that hangs up before the host answers, and goes on serving it', async () => {
    await using runner = await nsRunner({ listen: true, network })
    const id = await createSandbox(runner, { network: { egress: { allow: [`outside.test:${port}`] } } })
    const gaveUp = await exec(
      runner,
      id,
      `curl -s --max-time 1 http://outside.test:${port}/slow; echo " gave-up=$?"`,
    )
    expect(gaveUp.stdout).toContain('gave-up=28')
    await vi.waitFor(() => expect(slowAnswered).toBe(true), { timeout: 30_000, interval: 100 })
    // The late answer (if the runner still waited for it) met a client that was gone; the runner
    // (this process) lives on and serves the program again.
    const after = await exec(runner, id, `curl -s http://outside.test:${port}/after`)
    expect(after.stdout).toBe('outside /after')
  })

  it('keeps a sandbox’s egress working across a runner restart, under the stored policy', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-egress-restart-'))
    let id = ''
    {
      await using first = await nsRunner({ listen: true, network, stateDir, keepAgents: true })
      id = await createSandbox(first, { network: { egress: { allow: [`outside.test:${port}`] } } })
    }
    await using second = await nsRunner({ listen: true, network, stateDir, removeStateDir: true })
    const r = await exec(
      second,
      id,
      `curl -s http://outside.test:${port}/again; echo " ok=$?"; curl -s -o /dev/null -w "%{http_code}" http://evil.test:${port}/; echo " evil"`,
    )
    expect(r.stdout).toBe('outside /again ok=0\n403 evil\n')
  })

  it('gives a sandbox without an allowlist no proxy and no way out', async () => {
    await using runner = await nsRunner({ listen: true, network })
    const id = await createSandbox(runner)
    const r = await exec(
      runner,
      id,
      `echo "proxy=$HTTP_PROXY"; curl -s --max-time 5 -x http://127.0.0.1:3128 http://outside.test:${port}/; echo " via=$?"`,
    )
    expect(r.stdout).toBe('proxy=\n via=7\n')
  })

  it('refuses an allowlist on a driver without a network namespace, and a malformed rule', async () => {
    await using runner = await startRunner({ network })
    const local = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { network: { egress: { allow: ['outside.test'] } } },
    })
    expect(local.statusCode).toBe(400)
    expect(local.json().error.code).toBe('LIMITS_NOT_ENFORCEABLE')
    expect(runner.app.conch.manager.list()).toEqual([])
    const bad = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: { network: { egress: { allow: ['10.0.0.0/33'] } } },
    })
    expect(bad.statusCode).toBe(400)
    expect(bad.json().error.code).toBe('BAD_REQUEST')
  })
})
