// The published package, as a user gets it: `pnpm pack` the runner, check what the tarball
// holds, then run it the way the README says (`npx @conch/runner runner`, here `npm exec` of
// the tarball) in an empty folder with an empty npm cache, so its dependencies come from the
// npm registry and nothing from this checkout. A sandbox of the namespace driver, driven
// through the SDK, then shows what the agent's runtime inside is: Node and one file.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { fileURLToPath } from 'node:url'
import { AGENT_NODE_FLAGS, compileCacheFlag } from '@conch/protocol'
import { Sandbox } from '@conch/sdk'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateApiKey } from '../src/credentials.ts'
import { descendantsOf } from '../src/drivers/proc-stat.ts'
import { RUNNER_NODE_FLAGS } from '../src/runner-node-flags.ts'

const RUNNER_DIR = fileURLToPath(new URL('..', import.meta.url))
/** The Node that runs the packed runner (and so its agents): this test's, or CONCH_PACKAGE_NODE. */
const NODE = process.env.CONCH_PACKAGE_NODE ?? process.execPath
/** Packing builds, and `npm exec` fetches the dependencies from the registry. */
const SETUP_TIMEOUT_MS = 240_000

let work: string
let tarball: string
let entries: string[]
let runner: ChildProcess
let url: string
let log = ''
const apiKey = generateApiKey()

function run(cmd: string, args: string[], cwd: string): string {
  const result = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (result.status !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${result.status}): ${result.stderr}${result.error ?? ''}`,
    )
  }
  return result.stdout
}

/** The host pid, argv and executable of a sandbox's agent, found from its driver state. */
function agentOf(sandboxId: string): { argv: string[]; exe: string } {
  const db = new DatabaseSync(join(work, 'state', 'runner.db'), { readOnly: true })
  const row = db.prepare('SELECT driver_state FROM sandboxes WHERE id = ?').get(sandboxId)
  db.close()
  const { pid } = JSON.parse(String(row?.driver_state)) as { pid: number }
  for (const p of [pid, ...descendantsOf(pid)]) {
    let argv: string[]
    try {
      argv = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')
    } catch {
      continue // it exited since the listing
    }
    if (argv[0]?.endsWith('/node') && argv.includes('--listenFd')) return { argv, exe: `/proc/${p}/exe` }
  }
  throw new Error(`no agent under pid ${pid}`)
}

/** The packed file's text. */
function packed(path: string): string {
  return run('tar', ['-xzOf', tarball, `package/${path}`], work)
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'conch-package-'))
  run('pnpm', ['pack', '--pack-destination', work], RUNNER_DIR)
  const name = readdirSync(work).find((f) => f.endsWith('.tgz'))
  if (!name) throw new Error(`pnpm pack wrote no tarball into ${work}`)
  tarball = join(work, name)
  entries = run('tar', ['-tzf', tarball], work)
    .split('\n')
    .filter(Boolean)
    .map((e) => e.replace(/^package\//, ''))

  const empty = join(work, 'empty')
  mkdirSync(empty)
  // `conch` runs on whichever `node` PATH finds first.
  const env = {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('CONCH_') && !k.startsWith('npm_')),
    ),
    PATH: `${dirname(NODE)}${delimiter}${process.env.PATH ?? ''}`,
    npm_config_cache: join(work, 'npm-cache'),
    npm_config_update_notifier: 'false',
    CONCH_API_KEY: apiKey,
  }
  runner = spawn(
    'npm',
    [
      'exec',
      '--yes',
      `--package=${tarball}`,
      '--',
      'conch',
      'runner',
      '--port',
      '0',
      '--state-dir',
      join(work, 'state'),
      '--drivers',
      'namespace',
    ],
    { cwd: empty, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      log += chunk
      const match = /listening on (http:\/\/[\d.:]+)/.exec(log)
      if (match) resolve(match[1]!)
    }
    runner.stdout?.on('data', onData)
    runner.stderr?.on('data', onData)
    runner.once('exit', (code) => reject(new Error(`npm exec conch runner exited (${code}):\n${log}`)))
  })
}, SETUP_TIMEOUT_MS)

afterAll(async () => {
  // Agents outlive their runner by design: destroy whatever a failed test left behind first.
  if (url) {
    for (const { id } of await Sandbox.list({ url, apiKey }).catch(() => [])) {
      await (await Sandbox.connect(id, { url, apiKey })).destroy().catch(() => {})
    }
  }
  if (runner?.pid && runner.exitCode === null) {
    const exited = new Promise((resolve) => runner.once('exit', resolve))
    process.kill(-runner.pid, 'SIGTERM')
    await exited
  }
  if (work) rmSync(work, { recursive: true, force: true })
})

describe('the packed @conch/runner', () => {
  it('holds built JavaScript, the agent bundle, README and LICENSE, and no sources or tests', () => {
    expect(entries).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'LICENSE',
        'dist/conch.js',
        'dist/conch-agent.mjs',
      ]),
    )
    expect(entries.filter((e) => e.endsWith('.ts') && !e.endsWith('.d.ts'))).toEqual([])
    expect(entries.filter((e) => /(^|\/)(test|bench|src|scripts)\/|\.test\./.test(e))).toEqual([])
  })

  it('names no workspace package in its manifest and runs dist/conch.js as `conch`', () => {
    const manifest = JSON.parse(packed('package.json')) as Record<string, unknown>
    expect(manifest.private).toBeUndefined()
    expect(manifest.bin).toEqual({ conch: './dist/conch.js' })
    expect(Object.keys(manifest.dependencies as object).filter((d) => d.startsWith('@conch/'))).toEqual([])
    expect(JSON.stringify(manifest)).not.toContain('workspace:')
  })

  it('runs `conch runner` with the runner node flags, started through npm exec and the bin', () => {
    // The warm pool starts short-lived helpers (mkfs, mount) under the runner: one may exit
    // between the listing and the read.
    const cmdline = (p: number): string[] => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')
      } catch {
        return []
      }
    }
    const nodes = [runner.pid!, ...descendantsOf(runner.pid!)]
      .map(cmdline)
      // The bin runs by the path npm linked it under, not as dist/conch.js; npm names it bare.
      .filter(
        (argv) =>
          argv[0]?.endsWith('node') && /^\/.*\/conch(\.js)?$/.test(argv[argv.indexOf('runner') - 1] ?? ''),
      )
    expect(nodes).toHaveLength(1)
    expect(nodes[0]!.slice(1, 1 + RUNNER_NODE_FLAGS.length)).toEqual(RUNNER_NODE_FLAGS)
  })

  it('ships JavaScript that is all ASCII, so V8 holds each source one byte per character', () => {
    const scripts = entries.filter((e) => /^dist\/[^/]+\.m?js$/.test(e))
    expect(scripts.length).toBeGreaterThan(2)
    const nonAscii = scripts.filter((e) => /[\u0080-\uffff]/.test(packed(e)))
    expect(nonAscii).toEqual([])
  })

  it('ships the runner as bundled chunks that import only Node built-ins and the dependencies kept for first use', () => {
    const manifest = JSON.parse(packed('package.json')) as { dependencies: Record<string, string> }
    const chunks = entries.filter((e) => /^dist\/(conch|runner-[^/]+)\.js$/.test(e)).map(packed)
    expect(chunks.length).toBeGreaterThan(2)
    // esbuild writes its own imports at the start of a line, in double quotes: what is indented
    // or single-quoted is text (JSDoc, the console's examples).
    const specifiers = chunks.flatMap((chunk) => [
      ...[...chunk.matchAll(/^(?:import|export)\b[^;]*?"([^"\n]+)";$/gm)].map((m) => m[1]!),
      ...[...chunk.matchAll(/\bimport\("([^"\n]+)"\)/g)].map((m) => m[1]!),
    ])
    expect(specifiers).toContain('node:fs')
    const packages = new Set(
      specifiers
        .filter((s) => !s.startsWith('node:') && !s.startsWith('./'))
        .map((s) =>
          s
            .split('/')
            .slice(0, s.startsWith('@') ? 2 : 1)
            .join('/'),
        ),
    )
    // Each import left in dist/ is loaded on first use, and is a dependency npm installs beside it.
    expect([...packages].sort()).toEqual(
      ['@modelcontextprotocol/sdk', '@peculiar/x509', 'esbuild', 'reflect-metadata', 'ssh2'].sort(),
    )
    expect([...packages].filter((p) => p !== 'esbuild' && !(p in manifest.dependencies))).toEqual([])
    // fastify, ws, pino and zod are in the bundle; zod without the locales it only re-exports.
    const text = chunks.join('\n')
    for (const bundled of [
      '/fastify/fastify.js',
      '/ws/lib/websocket.js',
      '/pino/pino.js',
      '/zod/v4/locales/en.js',
    ]) {
      expect(text).toContain(bundled)
    }
    expect(text).not.toContain('/zod/v4/locales/de.js')
  })

  it('ships an agent bundle that imports nothing but Node built-ins', () => {
    const bundle = packed('dist/conch-agent.mjs')
    const imports = [...bundle.matchAll(/^\s*(?:import|export)\b[^;'"]*?\bfrom\s*["']([^"']+)["']/gm)].map(
      (m) => m[1],
    )
    expect(imports.length).toBeGreaterThan(0)
    expect(imports.filter((i) => !i?.startsWith('node:'))).toEqual([])
    expect(bundle).not.toMatch(/\brequire\(["'](?!node:)/)
    expect(bundle).not.toMatch(/\bimport\(["'](?!node:)/)
  })

  it('installs from the registry into an empty folder with no @conch package but itself', () => {
    const installs = join(work, 'npm-cache', '_npx')
    const scopes = readdirSync(installs).map((d) => join(installs, d, 'node_modules', '@conch'))
    const scope = scopes.find((s) => existsSync(s))
    expect(scope).toBeDefined()
    expect(readdirSync(scope!)).toEqual(['runner'])
  })

  it('prints the version of its own manifest for conch --version, and its help for conch alone', () => {
    const installs = join(work, 'npm-cache', '_npx')
    const bin = readdirSync(installs)
      .map((d) => join(installs, d, 'node_modules', '@conch', 'runner', 'dist', 'conch.js'))
      .find((b) => existsSync(b))
    expect(bin).toBeDefined()
    const manifest = JSON.parse(packed('package.json')) as { version: string }
    const version = spawnSync(NODE, [bin!, '--version'], { encoding: 'utf8' })
    expect(version.stdout).toBe(`${manifest.version}\n`)
    const help = spawnSync(NODE, [bin!], { encoding: 'utf8' })
    expect(help.status).toBe(0)
    expect(help.stdout).toMatch(/--log-format <format> +env CONCH_LOG_FORMAT/)
  })

  it('serves conch mcp over stdio from the installed package, with the MCP server bundled in', async () => {
    const installs = join(work, 'npm-cache', '_npx')
    const bin = readdirSync(installs)
      .map((d) => join(installs, d, 'node_modules', '@conch', 'runner', 'dist', 'conch.js'))
      .find((b) => existsSync(b))
    const transport = new StdioClientTransport({
      command: NODE,
      args: [bin!, 'mcp', '--url', url],
      env: { PATH: process.env.PATH ?? '', CONCH_API_KEY: apiKey },
      stderr: 'pipe',
    })
    const client = new Client({ name: 'package-test', version: '1.0.0' })
    await client.connect(transport)
    try {
      // The tools' zod schemas come from the zod bundled into dist/, the MCP SDK uses the zod
      // installed beside it: descriptions and validation must cross between the two copies.
      const tools = (await client.listTools()).tools
      const shellRun = tools.find((t) => t.name === 'shell_run')
      expect(shellRun?.inputSchema.properties?.sandbox).toMatchObject({
        type: 'string',
        description: expect.stringMatching(/^Sandbox id/),
      })
      const bad = await client.callTool({ name: 'shell_run', arguments: { sandbox: 5, command: 'true' } })
      expect(bad.isError).toBe(true)
      expect(JSON.stringify(bad.content)).toMatch(/sandbox/)
      const created = await client.callTool({ name: 'sandbox_create', arguments: {} })
      const sandbox = (created.structuredContent as { sandbox: string }).sandbox
      const r = await client.callTool({ name: 'shell_run', arguments: { sandbox, command: 'echo from-mcp' } })
      expect((r.structuredContent as { stdout: string }).stdout).toBe('from-mcp\n')
      await client.callTool({ name: 'sandbox_destroy', arguments: { sandbox } })
    } finally {
      await client.close()
    }
  })

  it('starts from the installed package loading its own chunks and no module from node_modules', async () => {
    const installs = join(work, 'npm-cache', '_npx')
    const bin = readdirSync(installs)
      .map((d) => join(installs, d, 'node_modules', '@conch', 'runner', 'dist', 'conch.js'))
      .find((b) => existsSync(b))
    expect(bin).toBeDefined()
    const dir = mkdtempSync(join(work, 'loaded-'))
    const out = join(dir, 'loaded.txt')
    // module.register's hooks see every module the ES loader loads (module.registerHooks is
    // missing from the oldest Node the package supports); the bin's start-again keeps --import.
    const hooks = `data:text/javascript,${encodeURIComponent(
      `import { appendFileSync } from 'node:fs'
       export async function load(url, context, next) { appendFileSync(${JSON.stringify(out)}, url + '\\n'); return next(url, context) }`,
    )}`
    const preload = `data:text/javascript,${encodeURIComponent(
      `import { register } from 'node:module'; register(${JSON.stringify(hooks)})`,
    )}`
    const key = generateApiKey()
    const child = spawn(
      NODE,
      [
        `--import=${preload}`,
        bin!,
        'runner',
        '--port',
        '0',
        '--state-dir',
        join(dir, 'state'),
        '--log-level',
        'warn',
      ],
      {
        env: {
          PATH: process.env.PATH ?? '',
          CONCH_API_KEY: key,
          CONCH_DRIVER: 'local',
          CONCH_UNSAFE_LOCAL: '1',
          CONCH_WARM_POOL: '0',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    const exited = new Promise((resolve) => child.once('exit', resolve))
    try {
      let printed = ''
      const started = await new Promise<string>((resolve, reject) => {
        const onData = (chunk: Buffer): void => {
          printed += chunk
          const match = /listening on (http:\/\/[\d.:]+)/.exec(printed)
          if (match) resolve(match[1]!)
        }
        child.stdout.on('data', onData)
        child.stderr.on('data', onData)
        child.once('exit', (code) => reject(new Error(`the installed runner exited (${code}):\n${printed}`)))
      })
      const headers = { authorization: `Bearer ${key}` }
      expect((await fetch(`${started}/readyz`, { headers })).status).toBe(200)
      expect((await fetch(`${started}/v1/sandboxes`, { headers })).status).toBe(200)
      const bad = await fetch(`${started}/v1/sandboxes`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: 'not json',
      })
      expect(bad.status).toBe(400)
      // zod's English messages come with its own import of en.js, which the locale stub keeps.
      const wrong = await fetch(`${started}/v1/sandboxes`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ driver: 5 }),
      })
      expect(wrong.status).toBe(400)
      expect(await wrong.json()).toMatchObject({
        error: {
          code: 'BAD_REQUEST',
          message: expect.stringMatching(/driver: .*expected string, received number/),
        },
      })
      const loaded = readFileSync(out, 'utf8').split('\n').filter(Boolean)
      const chunks = loaded.filter((u) => /\/dist\/runner-[^/]+\.js$/.test(u))
      expect(chunks.length).toBeGreaterThan(0)
      expect(
        loaded.filter((u) => u.startsWith('file:') && !/\/@conch\/runner\/dist\/[^/]+\.js$/.test(u)),
      ).toEqual([])
    } finally {
      child.kill('SIGTERM')
      await exited
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('runs a command through the SDK in a namespace sandbox whose runtime is Node and the agent bundle', async () => {
    await using sandbox = await Sandbox.create({ url, apiKey, driver: 'namespace' })
    const shell = await sandbox.shell()
    const mounts = await shell.run("awk '{ print $5 }' /proc/self/mountinfo | grep ^/opt/")
    // The agent (the sandbox user may not run it) is that Node, running the bundle with the
    // drivers' node flags and the read-only compile cache built into the runtime image.
    const agent = agentOf(sandbox.id)
    expect(agent.argv.slice(0, AGENT_NODE_FLAGS.length + 3)).toEqual([
      '/opt/conch/node',
      ...AGENT_NODE_FLAGS,
      compileCacheFlag('/opt/conch/compile-cache'),
      '/opt/conch/conch-agent.mjs',
    ])
    const version = (exe: string): string => spawnSync(exe, ['--version'], { encoding: 'utf8' }).stdout
    expect(version(agent.exe)).toBe(version(NODE))
    // node-pty's runtime (dist/node-pty) for terminals and the bundle's compile cache are the
    // others, read-only too.
    expect(mounts.stdout.split('\n').filter(Boolean).sort()).toEqual([
      '/opt/conch/compile-cache',
      '/opt/conch/conch-agent.mjs',
      '/opt/conch/node',
      '/opt/conch/node-pty',
    ])
    // The agent's code cannot be changed or replaced from inside: the next agent start would run it.
    const tamper = await shell.run(
      [
        ': >> /opt/conch/conch-agent.mjs 2>/dev/null && echo appended',
        'rm -f /opt/conch/conch-agent.mjs 2>/dev/null && echo removed',
        'mv /opt/conch/conch-agent.mjs /tmp/x 2>/dev/null && echo moved',
        ': >> /opt/conch/node-pty/build/Release/pty.node 2>/dev/null && echo addon-appended',
        'rm -rf /opt/conch/node-pty/lib 2>/dev/null && echo lib-removed',
        'touch /opt/conch/compile-cache/x 2>/dev/null && echo cache-written',
        'echo done',
      ].join('; '),
    )
    expect(tamper.stdout).toBe('done\n')
    // Neither the install folder (npm's cache) nor any node_modules is reachable there.
    const probe = await shell.run(
      `test -e ${JSON.stringify(work)} && echo visible; find /opt /workspace -name node_modules; echo done`,
    )
    expect(probe.stdout).toBe('done\n')
  })
})
