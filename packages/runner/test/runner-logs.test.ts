// The runner's log as a real child process: pino JSON lines when stderr is not a terminal, one
// line per HTTP request (probes at debug), a short first line about the driver, and readable
// lines on a terminal (under `script`) or with --log-format pretty.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, vi } from 'vitest'
import { generateApiKey } from '../src/credentials.ts'
import { cli } from './runner-process.ts'

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))
/** The escape that starts an ANSI colour sequence. */
const ESC = '\u001b'

/** Env for a runner on the local driver (these tests are about its log, not isolation). */
function env(apiKey: string): Record<string, string> {
  return { CONCH_API_KEY: apiKey, CONCH_DRIVER: 'local', CONCH_UNSAFE_LOCAL: '1' }
}

/** GET `path` on `url` with the key; resolves with the status. */
async function get(url: string, path: string, apiKey: string): Promise<number> {
  const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${apiKey}` } })
  await res.arrayBuffer()
  return res.status
}

interface LogLine {
  level: number
  msg: string
  url?: string
  method?: string
  statusCode?: number
  responseTime?: number
}

describe('the log when stderr is not a terminal', () => {
  it('is pino JSON with one line per request, probes only at debug, and a short driver line', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-logs-'))
    const apiKey = generateApiKey()
    try {
      await using run = cli(['runner', '--port', '0', '--state-dir', stateDir], env(apiKey))
      const [, url] = await run.waitFor(/listening on (http:\/\/[\d.:]+)/)
      expect(await get(url!, '/v1/sandboxes', apiKey)).toBe(200)
      expect(await get(url!, '/v1/sandboxes', apiKey)).toBe(200)
      expect(await get(url!, '/v1/nope', apiKey)).toBe(404)
      expect(await get(url!, '/healthz', apiKey)).toBe(200)
      expect(await get(url!, '/v1/sandboxes?mark=end', apiKey)).toBe(200)
      await vi.waitFor(() => expect(run.err()).toContain('mark=end'))
      const lines = run
        .err()
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as LogLine)
      const requests = lines.filter((l) => l.url !== undefined)
      expect(requests.map((l) => [l.level, l.method, l.url, l.statusCode])).toEqual([
        [30, 'GET', '/v1/sandboxes', 200],
        [30, 'GET', '/v1/sandboxes', 200],
        [30, 'GET', '/v1/nope', 404],
        [30, 'GET', '/v1/sandboxes?mark=end', 200],
      ])
      for (const r of requests) {
        expect(r.msg).toMatch(/^GET \S+ \d{3} \d+(\.\d)?ms$/)
        expect(r.responseTime).toBeTypeOf('number')
      }
      expect(run.err()).not.toMatch(/incoming request|request completed|not found/)
      const driverLine = lines.find((l) => l.msg.startsWith('default driver'))
      expect(driverLine?.msg).toBe('default driver local (isolation: none): local driver')
      for (const l of lines) expect(l.msg.length, l.msg).toBeLessThan(200)
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })

  it('logs probes and the full driver description at --log-level debug', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-logs-'))
    const apiKey = generateApiKey()
    try {
      await using run = cli(
        ['runner', '--port', '0', '--state-dir', stateDir, '--log-level', 'debug'],
        env(apiKey),
      )
      const [, url] = await run.waitFor(/listening on (http:\/\/[\d.:]+)/)
      expect(await get(url!, '/healthz', apiKey)).toBe(200)
      await vi.waitFor(() => expect(run.err()).toMatch(/"level":20.*"url":"\/healthz","statusCode":200/))
      expect(
        run
          .err()
          .split('\n')
          .filter((l) => l.includes('/healthz')),
      ).toHaveLength(1)
      expect(run.err()).toMatch(
        /"level":20.*"msg":"local driver: a plain child process on the host with NO isolation/,
      )
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })
})

describe('credentials in request URLs', () => {
  it('never reach the log: a port token in the query, an app secret, a key in the path', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-logs-'))
    const apiKey = generateApiKey()
    try {
      await using run = cli(['runner', '--port', '0', '--state-dir', stateDir], env(apiKey))
      const [, url] = await run.waitFor(/listening on (http:\/\/[\d.:]+)/)
      const auth = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
      const created = (await (
        await fetch(`${url}/v1/sandboxes`, { method: 'POST', headers: auth, body: '{}' })
      ).json()) as { id: string }
      const { token: sandboxToken } = (await (
        await fetch(`${url}/v1/sandboxes/${created.id}/tokens`, { method: 'POST', headers: auth, body: '{}' })
      ).json()) as { token: string }
      expect(sandboxToken).toMatch(/^cst_/)
      const exposed = (await (
        await fetch(`${url}/v1/sandboxes/${created.id}/exposed-ports/3000`, {
          method: 'POST',
          headers: auth,
          body: '{}',
        })
      ).json()) as { path: string; token: string }
      expect(exposed.token).toMatch(/^cpt_/)
      // A browser's first visit: the token in the query is traded for a cookie.
      const visit = await fetch(`${url}${exposed.path}`, { redirect: 'manual' })
      expect(visit.status).toBe(303)
      // The same token misplaced, an app's own secrets, and the sandbox token in a path.
      for (const path of [
        `/v1/sandboxes/${created.id}/ports/3000/x?token=app-secret-1&conch_port_token=${encodeURIComponent(exposed.token)}`,
        `/v1/sandboxes?api_key=app-secret-2&Access_Token=app-secret-3&page=2`,
        `/v1/sandboxes/${created.id}/ports/3000/${exposed.token}`,
        `/v1/nope/${sandboxToken}?mark=end`,
      ])
        await (await fetch(`${url}${path}`)).arrayBuffer()
      await vi.waitFor(() => expect(run.err()).toContain('mark=end'))
      const log = run.err()
      for (const secret of [
        exposed.token,
        sandboxToken,
        apiKey,
        'app-secret-1',
        'app-secret-2',
        'app-secret-3',
      ])
        expect(log).not.toContain(secret)
      // What is left is still a readable line per request.
      expect(log).toContain('api_key=[redacted]&Access_Token=[redacted]&page=2')
      expect(log).toContain(`/v1/sandboxes/${created.id}/ports/3000/?conch_port_token=[redacted] 303`)
      await fetch(`${url}/v1/sandboxes/${created.id}`, {
        method: 'DELETE',
        headers: { authorization: auth.authorization },
      })
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })
})

describe('the log for a person', () => {
  it('is one readable line per record with --log-format pretty, without colour off a terminal', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-logs-'))
    const apiKey = generateApiKey()
    try {
      await using run = cli(
        ['runner', '--port', '0', '--state-dir', stateDir, '--log-format', 'pretty'],
        env(apiKey),
      )
      const [, url] = await run.waitFor(/listening on (http:\/\/[\d.:]+)/)
      expect(await get(url!, '/v1/sandboxes', apiKey)).toBe(200)
      await vi.waitFor(() => expect(run.err()).toMatch(/GET \/v1\/sandboxes 200/))
      const lines = run.err().trimEnd().split('\n')
      for (const line of lines)
        expect(line).toMatch(/^\d\d:\d\d:\d\d (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) \S/)
      expect(run.err()).not.toContain(ESC)
      expect(run.err()).not.toContain('{"level"')
      expect(lines).toContainEqual(
        expect.stringMatching(
          /^\d\d:\d\d:\d\d WARN {2}default driver local \(isolation: none\): local driver allowedDrivers=/,
        ),
      )
      expect(lines).toContainEqual(
        expect.stringMatching(/^\d\d:\d\d:\d\d INFO {2}GET \/v1\/sandboxes 200 [\d.]+ms reqId=\S+$/),
      )
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })

  it('is readable and coloured on a terminal without any flag (run under script)', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-logs-'))
    const apiKey = generateApiKey()
    try {
      const command = [
        process.execPath,
        '--conditions=source',
        MAIN,
        'runner',
        '--port',
        '0',
        '--state-dir',
        stateDir,
      ]
      const child = spawn('script', ['-qec', command.map((a) => `'${a}'`).join(' '), '/dev/null'], {
        // No warm pool (as `cli` sets): `script` ends the runner by hanging up its terminal, and
        // pooled agents (detached, local driver) would outlive it.
        env: { ...process.env, ...env(apiKey), CONCH_WARM_POOL: '0', NO_COLOR: '' },
        stdio: ['pipe', 'pipe', 'pipe'],
      })
      // `script` is in util-linux (bsdutils, essential on Debian); without it the spawn fails and so does the test.
      let spawnError: Error | null = null
      const exited = new Promise<void>((resolve) => {
        child.once('exit', () => resolve())
        child.once('error', (error) => {
          spawnError = error
          resolve()
        })
      })
      let out = ''
      child.stdout.on('data', (d) => {
        out += d
      })
      try {
        await vi.waitFor(
          () => {
            expect(spawnError).toBeNull()
            expect(out).toMatch(/listening on http:\/\/[\d.:]+/)
          },
          {
            timeout: 60_000,
            interval: 50,
          },
        )
        const url = /listening on (http:\/\/[\d.:]+)/.exec(out)![1]!
        expect(await get(url, '/v1/sandboxes', apiKey)).toBe(200)
        await vi.waitFor(() => expect(out).toMatch(/GET \/v1\/sandboxes 200/), {
          timeout: 30_000,
          interval: 50,
        })
        expect(out).not.toContain('{"level"')
        // Level labels are coloured: warn yellow, info green.
        expect(out).toContain(`${ESC}[33mWARN ${ESC}[0m default driver local (isolation: none): local driver`)
        expect(out).toContain(`${ESC}[32mINFO ${ESC}[0m GET /v1/sandboxes 200`)
      } finally {
        child.kill('SIGTERM')
        await exited
      }
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })
})
