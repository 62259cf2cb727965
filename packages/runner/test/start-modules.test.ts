// What a default `conch runner` start loads. Heavy modules that most runners never use (ssh2 for
// the ssh driver, the MCP server and its SDK, Node's undici behind fetch and WebSocket) are
// loaded on first use; a plain import of one of them anywhere in the start-up graph would put
// its memory (ssh2 alone ~17 MB, undici ~6 MB) back into every runner. The runner is started
// through its bin, as `pnpm runner`, the image and systemd start it, with a preload that records
// every module Node loads (module.registerHooks) and, on exit, the builtins it loaded.
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { generateApiKey } from '../src/credentials.ts'

const BIN = fileURLToPath(new URL('../src/bin.ts', import.meta.url))
/** The runner package: `-e` scripts resolve its dependencies from here, whatever vitest's cwd. */
const RUNNER_DIR = fileURLToPath(new URL('..', import.meta.url))

/** Records each loaded module's URL, and Node's builtin load list, into $LOADED_MODULES_OUT on exit. */
const PRELOAD = `data:text/javascript,${encodeURIComponent(`
  import { registerHooks } from 'node:module'
  import { writeFileSync } from 'node:fs'
  const urls = []
  registerHooks({ load(url, context, next) { urls.push(url); return next(url, context) } })
  process.on('exit', () => writeFileSync(process.env.LOADED_MODULES_OUT,
    JSON.stringify({ urls, builtins: process.moduleLoadList })))
`)}`

/** What a process loaded: module URLs, and builtins as Node lists them (`NativeModule <id>`). */
interface Loaded {
  urls: string[]
  builtins: string[]
}

/** Modules a default start must not load, each with how to spot it. */
const LAZY: { name: string; loaded: (l: Loaded) => boolean }[] = [
  { name: 'ssh2', loaded: (l) => l.urls.some((u) => u.includes('/node_modules/ssh2/')) },
  { name: 'cpu-features (ssh2)', loaded: (l) => l.urls.some((u) => u.includes('/cpu-features/')) },
  {
    name: '@modelcontextprotocol/sdk',
    loaded: (l) => l.urls.some((u) => u.includes('/@modelcontextprotocol/sdk/')),
  },
  { name: '@conch/mcp', loaded: (l) => l.urls.some((u) => u.includes('/packages/mcp/src/')) },
  { name: 'undici', loaded: (l) => l.builtins.some((b) => b.endsWith('internal/deps/undici/undici')) },
]

/** Runs `node <args>` with the preload until it exits (after `drive`, given its stdout so far). */
async function loadedBy(
  args: string[],
  env: Record<string, string>,
  drive: (out: () => string, stop: () => void) => Promise<void>,
): Promise<Loaded> {
  const dir = mkdtempSync(join(tmpdir(), 'conch-start-modules-'))
  const file = join(dir, 'loaded.json')
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CONCH_')))
  const child = spawn(process.execPath, ['--conditions=source', `--import=${PRELOAD}`, ...args], {
    env: { ...clean, ...env, CONCH_WARM_POOL: '0', LOADED_MODULES_OUT: file },
    cwd: RUNNER_DIR,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => {
    out += d
  })
  child.stderr.on('data', (d) => {
    err += d
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  try {
    await drive(
      () => out,
      () => child.kill('SIGTERM'),
    )
    expect(await exited, err).toBe(0)
    return JSON.parse(readFileSync(file, 'utf8')) as Loaded
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
}

describe('a default runner start', () => {
  it('loads none of the modules kept for first use, while serving requests', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-start-modules-state-'))
    const apiKey = generateApiKey()
    try {
      const loaded = await loadedBy(
        [BIN, 'runner', '--port', '0', '--state-dir', stateDir, '--log-level', 'warn'],
        { CONCH_API_KEY: apiKey, CONCH_DRIVER: 'local', CONCH_UNSAFE_LOCAL: '1' },
        async (out, stop) => {
          await expect
            .poll(() => /listening on (http:\/\/[\d.:]+)/.exec(out()), { timeout: 30_000 })
            .toBeTruthy()
          const url = /listening on (http:\/\/[\d.:]+)/.exec(out())![1]!
          const headers = { authorization: `Bearer ${apiKey}` }
          expect((await fetch(`${url}/readyz`, { headers })).status).toBe(200)
          expect((await fetch(`${url}/v1/sandboxes`, { headers })).status).toBe(200)
          stop()
        },
      )
      // The preload saw the runner's own start-up graph: an empty list would pass every check below.
      expect(loaded.urls.some((u) => u.endsWith('/packages/runner/src/app.ts'))).toBe(true)
      expect(loaded.urls.some((u) => u.includes('/node_modules/fastify/'))).toBe(true)
      expect(LAZY.filter((m) => m.loaded(loaded)).map((m) => m.name)).toEqual([])
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  }, 60_000)

  it('would be caught loading each of them: the same preload sees them when they are imported', async () => {
    const loaded = await loadedBy(
      [
        '--input-type=module',
        '-e',
        "await import('ssh2'); await import('@modelcontextprotocol/sdk/server/mcp.js'); await import('@conch/mcp'); await import('node:http')",
      ],
      {},
      async () => {},
    )
    expect(LAZY.filter((m) => !m.loaded(loaded)).map((m) => m.name)).toEqual([])
  }, 60_000)
})
