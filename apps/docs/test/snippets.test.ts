// The code samples on the site, run for real: starts the runner CLI (`conch runner`, from
// @conch/runner's bin) on a free port with a fresh state dir, then runs each file in snippets/
// as its own Node process against it and checks what it prints. Typecheck already proves the
// samples compile against the SDK; this proves they do what the pages say.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

/** Snippets that run against the runner, and what their output must contain. */
const RUN: Record<string, string[]> = {
  quickstart: ['"hi from /tmp\\n" 0', 'No such file or directory', 'step 3', 'exit code 0'],
  'exec-vs-shell': ['/tmp\nCI=1\n', '/tmp\nhello agent\n'],
  timeouts: ['true 130 started\n', 'test in /tmp\n', '130 false'],
  files: ['write the docs', 'todo.txt file 15', '\n1\n'],
  sessions: ['0 0', 'build open'],
  terminals: ['{ code: 0, signal: null }', 'hi bob\n'],
  // The probe in this sample uses curl; without it only the server's own output is checked.
  'background-servers': existsSync('/usr/bin/curl') ? ['ok\n', 'listening\n'] : ['listening\n'],
  reattach: ['compiling 10', 'build finished with 0'],
  'browser-token': ['cst_'],
  errors: ['no such sandbox'],
  // The scripted model's answer is the second tool result: the first call's cd and export held.
  'ai-sdk-agent': ['The shell said: exit code 0\nstdout:\nhello from /tmp', '3 steps'],
  snapshots: ['before-migration', 'app\nv1\nbefore\nbuilding v1\n', 'processesRestarted: 0', 'awake\n'],
}

/** Snippets that cannot run as a Node process on their own, and why. */
const NOT_RUN: Record<string, string> = {
  'scripted-model': 'a stand-in model, used by ai-sdk-agent',
  'agent-loop-errors': 'a helper function, exercised by the agent-loop example',
  'streaming-ui': 'serves HTTP until stopped',
  'streaming-ui-browser': 'runs in a browser page',
  'browser-client': 'runs in a browser page',
}

interface Runner {
  url: string
  apiKey: string
}

function runnerMain(): string {
  const pkgDir = join(root, 'node_modules', '@conch', 'runner')
  const pkg: unknown = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))
  const bin =
    typeof pkg === 'object' && pkg !== null && 'bin' in pkg && typeof pkg.bin === 'object' && pkg.bin !== null
      ? (pkg.bin as Record<string, unknown>).conch
      : undefined
  if (typeof bin !== 'string') throw new Error('@conch/runner has no "conch" bin')
  return join(pkgDir, bin)
}

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CONCH_')) env[k] = v
  return env
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode)
    else child.once('exit', (code) => resolve(code))
  })
}

const it = test.extend<{ runner: Runner }>({
  runner: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
    async ({}, use) => {
      const stateDir = mkdtempSync(join(tmpdir(), 'conch-docs-'))
      const apiKey = `conch_${randomBytes(24).toString('hex')}`
      const child = spawn(
        process.execPath,
        [
          '--conditions=source',
          runnerMain(),
          'runner',
          '--port',
          '0',
          '--state-dir',
          stateDir,
          '--log-level',
          'warn',
        ],
        // The snippets show the SDK, not isolation; the local driver's agents stop with their
        // state dir, so it is allowed here even as root.
        {
          env: { ...cleanEnv(), CONCH_API_KEY: apiKey, CONCH_DRIVER: 'local', CONCH_UNSAFE_LOCAL: '1' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
      let log = ''
      child.stderr?.on('data', (chunk: Buffer) => {
        log += chunk.toString()
      })
      try {
        const url = await new Promise<string>((resolve, reject) => {
          let out = ''
          child.stdout?.on('data', (chunk: Buffer) => {
            out += chunk.toString()
            const match = /listening on (http:\/\/\S+)/.exec(out)
            if (match?.[1]) resolve(match[1])
          })
          child.once('exit', (code) => reject(new Error(`runner exited (${code}) before listening:\n${log}`)))
        })
        await use({ url, apiKey })
        // Agents outlive their runner by design: destroy every sandbox the snippets left behind.
        const headers = { authorization: `Bearer ${apiKey}` }
        const list: unknown = await (await fetch(`${url}/v1/sandboxes`, { headers })).json()
        const sandboxes =
          typeof list === 'object' && list !== null && 'sandboxes' in list && Array.isArray(list.sandboxes)
            ? list.sandboxes
            : []
        for (const sb of sandboxes) {
          if (typeof sb === 'object' && sb !== null && 'id' in sb && typeof sb.id === 'string') {
            await fetch(`${url}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers })
          }
        }
      } finally {
        child.kill('SIGTERM')
        await exited(child)
        rmSync(stateDir, { recursive: true, force: true })
      }
    },
    { scope: 'file' },
  ],
})

function runSnippet(
  name: string,
  runner: Runner,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--conditions=source', join('snippets', `${name}.ts`)], {
      cwd: root,
      env: { ...cleanEnv(), CONCH_URL: runner.url, CONCH_API_KEY: runner.apiKey },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 60_000,
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString()
    })
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

test('classifies every snippet as run or not run', () => {
  const files = readdirSync(join(root, 'snippets'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.slice(0, -3))
    .sort()
  expect(files).toEqual([...Object.keys(RUN), ...Object.keys(NOT_RUN)].sort())
})

for (const [name, expected] of Object.entries(RUN)) {
  it.concurrent(`runs snippets/${name}.ts against a real runner`, async ({ runner }) => {
    const result = await runSnippet(name, runner)
    expect(result.code, `${name} failed:\n${result.stdout}\n${result.stderr}`).toBe(0)
    for (const text of expected) expect(result.stdout, name).toContain(text)
  })
}
