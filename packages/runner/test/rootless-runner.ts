// Test fixture: a real `conch runner` process started as an unprivileged system user, so the
// namespace driver runs rootless. Tests run as root; the user (`conch-rootless`) is created with
// useradd when missing, and its state dir is a fresh 0700 temp dir it owns. `prelude` runs as
// root in a private mount namespace before the runner drops to that user, so a test can take
// something away from the host the runner sees (bubblewrap, cgroups). `await using` destroys the
// sandboxes, stops the runner and removes the state dir.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { chmodSync, chownSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { RunResult, SandboxInfo } from '@conch/protocol'
import { generateApiKey } from '../src/credentials.ts'
import { removeOwnTree } from '../src/drivers/rootless-workspace.ts'

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))

/** The unprivileged user rootless runners run as. */
export const ROOTLESS_USER = 'conch-rootless'

/** The uid and gid of ROOTLESS_USER, created (as a system user) when missing; throws when not root. */
export function rootlessUser(): { uid: number; gid: number } {
  if (process.getuid?.() !== 0)
    throw new Error('rootless tests start the runner as another user: run them as root')
  const id = (flag: string): number =>
    Number(spawnSync('id', [flag, ROOTLESS_USER], { encoding: 'utf8' }).stdout)
  if (spawnSync('id', [ROOTLESS_USER]).status !== 0) {
    const made = spawnSync(
      'useradd',
      ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', ROOTLESS_USER],
      {
        encoding: 'utf8',
      },
    )
    if (made.status !== 0 && spawnSync('id', [ROOTLESS_USER]).status !== 0)
      throw new Error(`useradd ${ROOTLESS_USER} failed: ${made.stderr}`)
  }
  return { uid: id('-u'), gid: id('-g') }
}

/** A fresh 0700 state dir owned by the rootless user. */
export function rootlessStateDir(): string {
  const { uid, gid } = rootlessUser()
  const dir = mkdtempSync(join(tmpdir(), 'conch-rootless-'))
  chownSync(dir, uid, gid)
  chmodSync(dir, 0o700)
  return dir
}

/** Options of a runner process. */
export interface RunnerProcessOptions {
  /** Shell run as root in the runner's private mount namespace before it starts. */
  prelude?: string
  /** Run the runner as root (after the prelude) instead of the rootless user. */
  asRoot?: boolean
  /** Extra runner flags. */
  args?: string[]
}

/** The argv (program first) that starts a runner on `stateDir` with `options`. */
export function runnerArgv(stateDir: string, options: RunnerProcessOptions = {}): string[] {
  const { uid, gid } = rootlessUser()
  const drop = options.asRoot ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--']
  const runner = [
    process.execPath,
    '--conditions=source',
    MAIN,
    'runner',
    '--port',
    '0',
    '--state-dir',
    stateDir,
  ]
  return [
    'unshare',
    '--mount',
    '--propagation',
    'private',
    '--',
    'sh',
    '-c',
    `${options.prelude ?? 'true'} && exec "$@"`,
    'sh',
    ...drop,
    ...runner,
    ...(options.args ?? []),
  ]
}

/**
 * The environment of a runner process: a PATH and its API key, nothing of the test's. The warm
 * pool is off (a `--warm-pool` flag turns it on): a disposed runner is killed, and its pooled
 * sandboxes would wait for a next start that never comes, its state dir being gone.
 */
export function runnerEnv(apiKey: string): Record<string, string> {
  return { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin', CONCH_API_KEY: apiKey, CONCH_WARM_POOL: '0' }
}

/** A rootless runner process and a small client for its API. */
export interface RootlessRunner extends AsyncDisposable {
  /** The current runner process. */
  readonly child: ChildProcess
  /** Its base URL. */
  readonly url: string
  /** Its API key. */
  apiKey: string
  /** Its state dir. */
  stateDir: string
  /** What the current process wrote to stderr (its log). */
  err: () => string
  /** Sends a request with the API key; resolves with status and parsed body. */
  request: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: unknown }>
  /** Creates a sandbox; throws unless 200. */
  create: (body?: Record<string, unknown>) => Promise<SandboxInfo>
  /** Runs `command` in a sandbox through POST /exec (in `sessionId` when given); throws unless 200. */
  exec: (id: string, command: string, sessionId?: string) => Promise<RunResult>
  /** Stops the runner with SIGTERM (agents keep running) and starts a new one on the same state dir. */
  restart: () => Promise<void>
}

/** One runner process on `stateDir`, resolved once it listens. */
async function launch(
  stateDir: string,
  apiKey: string,
  options: RunnerProcessOptions,
): Promise<{ child: ChildProcess; url: string; err: () => string; exited: Promise<void> }> {
  const [program, ...args] = runnerArgv(stateDir, options)
  const child = spawn(program!, args, { env: runnerEnv(apiKey), stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stderr?.on('data', (d) => {
    err += d
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (d) => {
      out += d
      const m = /listening on (http:\/\/[\d.:]+)/.exec(out)
      if (m) resolve(m[1]!)
    })
    void exited.then(() => reject(new Error(`the rootless runner exited before listening:\n${out}\n${err}`)))
  })
  return { child, url, err: () => err, exited }
}

/** Starts a runner as the rootless user and resolves once it listens. */
export async function rootlessRunner(options: RunnerProcessOptions = {}): Promise<RootlessRunner> {
  const stateDir = rootlessStateDir()
  const apiKey = generateApiKey()
  let current = await launch(stateDir, apiKey, options)
  const created: string[] = []
  const request = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${current.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : null }
  }
  return {
    get child() {
      return current.child
    },
    get url() {
      return current.url
    },
    apiKey,
    stateDir,
    err: () => current.err(),
    request,
    async create(body = {}) {
      const res = await request('POST', '/v1/sandboxes', body)
      if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`)
      const info = SandboxInfo.parse(res.body)
      created.push(info.id)
      return info
    },
    async exec(id, command, sessionId) {
      const res = await request('POST', `/v1/sandboxes/${id}/exec`, {
        command,
        ...(sessionId ? { sessionId } : {}),
      })
      if (res.status !== 200) throw new Error(`exec ${command}: ${res.status} ${JSON.stringify(res.body)}`)
      return RunResult.parse(res.body)
    },
    async restart() {
      current.child.kill('SIGTERM')
      await current.exited
      current = await launch(stateDir, apiKey, options)
    },
    async [Symbol.asyncDispose]() {
      for (const id of created) await request('DELETE', `/v1/sandboxes/${id}`).catch(() => {})
      if (current.child.exitCode === null && current.child.signalCode === null) current.child.kill('SIGKILL')
      await current.exited
      removeOwnTree(stateDir)
    },
  }
}
