// The published router, as a user gets it: `pnpm pack` @conch/router, check what the tarball
// holds, then run its `conch-router` bin the way the README says (`npx @conch/router`, here
// `npm exec` of the tarball) in an empty folder with an empty npm cache, so its dependencies
// come from the npm registry and nothing from this checkout. In front of it run two real runner
// shards; sandboxes are created, driven and listed through the packed router with the SDK.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { shardOfSandboxId } from '@conch/protocol'
import { Sandbox } from '@conch/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RunnerShard, shardList, startRunnerShard, sweepProcesses } from './runner-cluster.ts'

const ROUTER_DIR = fileURLToPath(new URL('..', import.meta.url))
/** The Node that runs the packed router: this test's, or CONCH_PACKAGE_NODE. */
const NODE = process.env.CONCH_PACKAGE_NODE ?? process.execPath
/** Packing builds, and `npm exec` fetches the dependencies from the registry. */
const SETUP_TIMEOUT_MS = 240_000

let work: string
let tarball: string
let entries: string[]
let router: ChildProcess
let url: string
let log = ''
const runners: RunnerShard[] = []
const apiKey = `conch_${randomBytes(24).toString('hex')}`

function run(cmd: string, args: string[], cwd: string): string {
  const result = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (result.status !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${result.status}): ${result.stderr}${result.error ?? ''}`,
    )
  }
  return result.stdout
}

/** The executable of the packed router's Node process: the one in its process group running the bin. */
function routerExe(): string {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
      const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      if (pgid === router.pid && argv.some((a) => a.endsWith('/conch-router'))) return `/proc/${pid}/exe`
    } catch {
      // The process ended while the table was read.
    }
  }
  throw new Error(`no conch-router process in group ${router.pid}`)
}

/** The packed file's text. */
function packed(path: string): string {
  return run('tar', ['-xzOf', tarball, `package/${path}`], work)
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'conch-router-package-'))
  run('pnpm', ['pack', '--pack-destination', work], ROUTER_DIR)
  const name = readdirSync(work).find((f) => f.endsWith('.tgz'))
  if (!name) throw new Error(`pnpm pack wrote no tarball into ${work}`)
  tarball = join(work, name)
  entries = run('tar', ['-tzf', tarball], work)
    .split('\n')
    .filter(Boolean)
    .map((e) => e.replace(/^package\//, ''))

  runners.push(
    await startRunnerShard('conch-0', apiKey, work),
    await startRunnerShard('conch-1', apiKey, work),
  )

  const empty = join(work, 'empty')
  mkdirSync(empty)
  // `conch-router` runs on whichever `node` PATH finds first. The router holds no key: none
  // is in its environment.
  const env = {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('CONCH_') && !k.startsWith('npm_')),
    ),
    PATH: `${dirname(NODE)}${delimiter}${process.env.PATH ?? ''}`,
    npm_config_cache: join(work, 'npm-cache'),
    npm_config_update_notifier: 'false',
  }
  router = spawn(
    'npm',
    [
      'exec',
      '--yes',
      `--package=${tarball}`,
      '--',
      'conch-router',
      'router',
      '--port',
      '0',
      '--poll-interval-ms',
      '200',
      '--shards',
      shardList(runners),
    ],
    { cwd: empty, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      log += chunk
      const match = /listening on (http:\/\/[\d.:]+)/.exec(log)
      if (match) resolve(match[1]!)
    }
    router.stdout?.on('data', onData)
    router.stderr?.on('data', onData)
    router.once('exit', (code) => reject(new Error(`npm exec conch-router exited (${code}):\n${log}`)))
  })
}, SETUP_TIMEOUT_MS)

afterAll(async () => {
  if (router?.pid && router.exitCode === null) {
    const exited = new Promise((resolve) => router.once('exit', resolve))
    process.kill(-router.pid, 'SIGTERM')
    await exited
  }
  await Promise.all(runners.map((r) => r.kill()))
  if (work) {
    sweepProcesses(work)
    rmSync(work, { recursive: true, force: true, maxRetries: 5 })
  }
})

describe('the packed @conch/router', () => {
  it('holds built JavaScript, README and LICENSE, and no sources or tests', () => {
    expect(entries).toEqual(
      expect.arrayContaining(['package.json', 'README.md', 'LICENSE', 'dist/conch-router.js']),
    )
    expect(entries.filter((e) => e.endsWith('.ts') && !e.endsWith('.d.ts'))).toEqual([])
    expect(entries.filter((e) => /(^|\/)(test|bench|src|scripts)\/|\.test\./.test(e))).toEqual([])
  })

  it('names no workspace package in its manifest and runs dist/conch-router.js as `conch-router`', () => {
    const manifest = JSON.parse(packed('package.json')) as Record<string, unknown>
    expect(manifest.private).toBeUndefined()
    expect(manifest.bin).toEqual({ 'conch-router': './dist/conch-router.js' })
    expect(Object.keys(manifest.dependencies as object).filter((d) => d.startsWith('@conch/'))).toEqual([])
    expect(JSON.stringify(manifest)).not.toContain('workspace:')
  })

  it('imports only Node built-ins, its own chunks and the npm dependencies its manifest names', () => {
    const manifest = JSON.parse(packed('package.json')) as { dependencies: Record<string, string> }
    const allowed = new Set(Object.keys(manifest.dependencies))
    const files = entries.filter((e) => e.startsWith('dist/') && e.endsWith('.js'))
    expect(files.length).toBeGreaterThan(1)
    for (const file of files) {
      const code = packed(file)
      const specifiers = [
        ...code.matchAll(/^\s*(?:import|export)\b[^;'"]*?\bfrom\s*["']([^"']+)["']/gm),
        ...code.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
      ].map((m) => m[1]!)
      const foreign = specifiers.filter(
        (s) => !s.startsWith('node:') && !/^\.\/router-[\w-]+\.js$/.test(s) && !allowed.has(s),
      )
      expect(foreign, file).toEqual([])
      expect(code, file).not.toMatch(/\brequire\(["'](?!node:)/)
    }
  })

  it('runs on the Node that PATH finds first (CONCH_PACKAGE_NODE picks an older one)', () => {
    const version = (exe: string): string => spawnSync(exe, ['--version'], { encoding: 'utf8' }).stdout
    expect(version(routerExe())).toBe(version(NODE))
  })

  it('installs from the registry into an empty folder with no @conch package but itself', () => {
    const installs = join(work, 'npm-cache', '_npx')
    const scopes = readdirSync(installs).map((d) => join(installs, d, 'node_modules', '@conch'))
    const scope = scopes.find((s) => existsSync(s))
    expect(scope).toBeDefined()
    expect(readdirSync(scope!)).toEqual(['router'])
  })

  it('refuses a Node older than 22.13 with one line naming the version, and starts on 22.13.0', () => {
    const installs = join(work, 'npm-cache', '_npx')
    const bin = readdirSync(installs)
      .map((d) => join(installs, d, 'node_modules', '@conch', 'router', 'dist', 'conch-router.js'))
      .find((f) => existsSync(f))!
    // The installed bin, on this Node made to report another version before the bin runs.
    const as = (version: string) =>
      spawnSync(
        NODE,
        [
          '--import',
          `data:text/javascript,Object.defineProperty(process.versions,'node',{value:'${version}'})`,
          bin,
          '--help',
        ],
        { encoding: 'utf8' },
      )
    for (const old of ['22.12.9', '20.19.0']) {
      const refused = as(old)
      expect(refused.status).toBe(1)
      expect(refused.stdout).toBe('')
      expect(refused.stderr).toMatch(/^conch-router: this router needs Node\.js 22\.13\.0 or newer/)
      expect(refused.stderr.trim().split('\n')).toHaveLength(1)
    }
    const accepted = as('22.13.0')
    expect(accepted.status).toBe(0)
    expect(accepted.stdout).toMatch(/^usage: conch-router/)
  })

  it('places, drives and lists sandboxes on both runners through the SDK', async () => {
    const client = { url, apiKey }
    await using first = await Sandbox.create(client)
    await using second = await Sandbox.create(client)
    // Least-loaded placement over two empty runners puts one sandbox on each.
    expect([shardOfSandboxId(first.id), shardOfSandboxId(second.id)].sort()).toEqual(['conch-0', 'conch-1'])
    const shell = await first.shell()
    await shell.run('cd /tmp && export GREETING=routed')
    const result = await shell.run('echo "$GREETING from $PWD"')
    expect(result.stdout).toBe('routed from /tmp\n')
    const listed = (await Sandbox.list(client)).map((s) => s.id)
    expect(listed).toEqual(expect.arrayContaining([first.id, second.id]))
    // Each runner holds only its own sandbox: the router forwarded, it did not copy.
    const direct = await Sandbox.list({ url: runners[0]!.current.url, apiKey })
    expect(direct.map((s) => s.id)).toEqual([
      [first, second].find((s) => shardOfSandboxId(s.id) === 'conch-0')!.id,
    ])
  })

  it('forwards a wrong API key to the runner, which refuses it: the router holds no key of its own', async () => {
    const stolen = { url, apiKey: `conch_${randomBytes(24).toString('hex')}` }
    await expect(Sandbox.list(stolen)).rejects.toMatchObject({ code: 'UNAUTHORIZED' })
    await expect(Sandbox.create(stolen)).rejects.toMatchObject({ code: 'UNAUTHORIZED' })
  })
})
