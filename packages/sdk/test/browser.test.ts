import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Browser, chromium, type Page } from 'playwright-core'
import { test as base, describe, expect } from 'vitest'
import type * as Sdk from '../src/index.ts'
import { Sandbox } from '../src/index.ts'
import { type RunnerChild, startRunnerChild } from './runner-child.ts'

// The built SDK (dist/index.js) in Debian's chromium, driving a real runner with a
// sandbox-scoped token. A small server gives the page its origin: it serves the page and dist,
// and passes /v1 requests and the shell WebSocket through to the runner untouched, so the
// page talks to the runner the way an app that fronts its runner does (same origin, no CORS).

const SDK_DIR = fileURLToPath(new URL('../', import.meta.url))
const DIST = join(SDK_DIR, 'dist')

/** Builds dist when it is missing or older than the sources. */
function ensureBuilt(): void {
  const newestSource = Math.max(
    ...readdirSync(join(SDK_DIR, 'src')).map((f) => statSync(join(SDK_DIR, 'src', f)).mtimeMs),
  )
  const built = join(DIST, 'index.js')
  if (existsSync(built) && statSync(built).mtimeMs >= newestSource) return
  execFileSync(join(SDK_DIR, 'node_modules/.bin/tsup'), { cwd: SDK_DIR, stdio: 'pipe' })
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>conch sdk</title>
<script type="module">
  import * as sdk from '/dist/index.js'
  globalThis.sdk = sdk
  globalThis.sdkReady = true
</script>`

/** Serves the page and dist, and proxies everything else (HTTP and WebSocket) to `target`. */
async function startOrigin(target: string): Promise<{ url: string } & AsyncDisposable> {
  const runner = new URL(target)
  const server = createServer((req, res) => {
    if (req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html' })
      res.end(PAGE)
      return
    }
    if (req.url?.startsWith('/dist/')) {
      const file = join(DIST, req.url.slice('/dist/'.length).replace(/[?#].*$/, ''))
      if (!file.startsWith(DIST) || !existsSync(file)) {
        res.writeHead(404).end()
        return
      }
      res.writeHead(200, { 'content-type': file.endsWith('.js') ? 'text/javascript' : 'application/json' })
      res.end(readFileSync(file))
      return
    }
    const upstream = request(
      { host: runner.hostname, port: runner.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      },
    )
    upstream.on('error', () => res.destroy())
    req.pipe(upstream)
  })
  server.on('upgrade', (req, socket, head) => {
    const upstream = connect(Number(runner.port), runner.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`]
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`)
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`)
      upstream.write(head)
      upstream.pipe(socket)
      socket.pipe(upstream)
    })
    upstream.on('error', () => socket.destroy())
    socket.on('error', () => upstream.destroy())
  })
  server.listen(0, '127.0.0.1')
  await new Promise((r) => server.once('listening', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    },
  }
}

interface Fixtures {
  runner: RunnerChild
  origin: { url: string }
  browser: Browser
  sandbox: { id: string; token: string }
  page: Page
}

const test = base.extend<Fixtures>({
  runner: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
    async ({}, use) => {
      ensureBuilt()
      await using runner = await startRunnerChild()
      await use(runner)
    },
    { scope: 'file' },
  ],
  origin: [
    async ({ runner }, use) => {
      await using origin = await startOrigin(runner.url)
      await use(origin)
    },
    { scope: 'file' },
  ],
  browser: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
    async ({}, use) => {
      const browser = await chromium.launch({
        executablePath: '/usr/bin/chromium',
        args: [
          '--no-sandbox',
          '--disable-gpu',
          '--disable-background-networking',
          '--disable-component-update',
          '--no-first-run',
          '--disable-sync',
        ],
      })
      try {
        await use(browser)
      } finally {
        await browser.close()
      }
    },
    { scope: 'file' },
  ],
  sandbox: async ({ runner }, use) => {
    await using sb = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
    const { token } = await sb.createAccessToken({ ttlMs: 10 * 60_000 })
    await use({ id: sb.id, token })
  },
  page: async ({ browser, origin }, use) => {
    const context = await browser.newContext()
    try {
      const page = await context.newPage()
      await page.goto(origin.url)
      await page.waitForFunction(() => (globalThis as { sdkReady?: boolean }).sdkReady === true)
      await use(page)
    } finally {
      await context.close()
    }
  },
})

describe('the built SDK in chromium', () => {
  test('runs stateful shell commands over a sandbox-scoped token', async ({ page, sandbox, origin }) => {
    const result = await page.evaluate(
      async ({ id, token, url }) => {
        const sdk = (globalThis as unknown as { sdk: typeof Sdk }).sdk
        const sb = await sdk.Sandbox.connect(id, { url: url, token })
        // Plain code only: this function is serialised into the page, so no `await using` helpers.
        const sh = await sb.shell()
        await sh.run('cd /tmp && export FROM_PAGE=chromium')
        const state = await sh.run('echo "$FROM_PAGE $(pwd)"')
        const failing = await sh.run('f() { echo oops >&2; return 3; }; f')
        const euro = await sh.run("printf '\\xe2\\x82\\xac'")
        const bytes = await sh.run("printf '\\xff\\x00\\xfe'", { encoding: 'binary' })
        const many = await Promise.all(Array.from({ length: 20 }, (_, i) => sh.run(`echo ${i}`)))
        const events: string[] = []
        for await (const ev of sh.stream('echo out; echo err >&2')) {
          events.push(ev.type === 'exit' ? `exit ${ev.exitCode}` : `${ev.type} ${ev.data}`)
        }
        await sb.files.write('from-page.txt', 'written in chromium')
        const file = await sb.files.read('from-page.txt')
        const listing = await sdk.Sandbox.list({ url: url, token }).then(
          () => 'listed',
          (err: unknown) => (err instanceof sdk.AuthError ? `AuthError ${err.code}` : String(err)),
        )
        await sh[Symbol.asyncDispose]()
        return {
          state: state.stdout,
          failing: [failing.exitCode, failing.stderr],
          euro: euro.stdout,
          bytes: [...bytes.stdout],
          many: many.map((r) => r.stdout.trim()).join(','),
          events,
          file,
          listing,
        }
      },
      { id: sandbox.id, token: sandbox.token, url: origin.url },
    )
    expect(result).toEqual({
      state: 'chromium /tmp\n',
      failing: [3, 'oops\n'],
      euro: '€',
      bytes: [0xff, 0x00, 0xfe],
      many: Array.from({ length: 20 }, (_, i) => i).join(','),
      // The two pipes are read independently, so only the order within a stream is fixed.
      events: expect.arrayContaining(['stdout out\n', 'stderr err\n', 'exit 0']),
      file: 'written in chromium',
      listing: expect.stringMatching(/^AuthError (UNAUTHORIZED|FORBIDDEN)$/),
    })
    expect(result.events.at(-1)).toBe('exit 0')
    expect(result.events).toHaveLength(3)
  }, 60_000)
})
