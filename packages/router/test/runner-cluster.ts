// Real runner and router processes on loopback for the router's integration tests. Runners are
// the `conch runner` CLI with the local driver and a shard name; the router is the `conch
// router` CLI with a shard table naming them. A runner can be killed and started again on the
// same port with the same state (the router's table is fixed). Disposing the cluster kills every
// process it started, and the agents they left behind (agents outlive runners by design), found
// by the state directory on their command lines.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const RUNNER_MAIN = fileURLToPath(new URL('../../runner/src/main.ts', import.meta.url))
const ROUTER_MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))

/** A CLI child process that printed the URL it listens on. */
export interface Listening {
  readonly url: string
  readonly port: number
  readonly child: ChildProcess
  readonly exited: Promise<void>
  /** Everything it wrote, for failure messages. */
  log(): string
  /** SIGKILLs it and waits for the exit. */
  kill(): Promise<void>
}

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CONCH_')) env[k] = v
  return { ...env, ...extra }
}

/** Spawns `node --conditions=source <main> <args>` and resolves once it prints its URL. */
export async function spawnListening(
  main: string,
  args: string[],
  env: Record<string, string>,
): Promise<Listening> {
  const child = spawn(process.execPath, ['--conditions=source', main, ...args], {
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let log = ''
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      log = (log + chunk.toString()).slice(-32_768)
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log)
      if (match) resolve(match[1]!)
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    void exited.then(() => reject(new Error(`exited before listening:\n${log}`)))
  })
  return {
    url,
    port: Number(new URL(url).port),
    child,
    exited,
    log: () => log,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}

/** One runner shard. */
export interface RunnerShard {
  readonly shard: string
  readonly stateDir: string
  /** The process now (replaced by `restart`). */
  current: Listening
  /** Kills the runner (its agents live on). */
  kill(): Promise<void>
  /** Starts it again on the same port with the same state. */
  restart(): Promise<void>
}

/** Starts `conch runner --shard <shard>` with the local driver (and `extraArgs`). */
export async function startRunnerShard(
  shard: string,
  apiKey: string,
  root: string,
  extraArgs: string[] = [],
): Promise<RunnerShard> {
  const stateDir = join(root, shard)
  const args = (port: number): string[] => [
    'runner',
    '--port',
    String(port),
    '--state-dir',
    stateDir,
    '--shard',
    shard,
    '--log-level',
    'warn',
    ...extraArgs,
  ]
  // No warm pool: pooled agents are not the tests' concern, and each would cost a Node process.
  const env = { CONCH_API_KEY: apiKey, CONCH_DRIVER: 'local', CONCH_UNSAFE_LOCAL: '1', CONCH_WARM_POOL: '0' }
  const first = await spawnListening(RUNNER_MAIN, args(0), env)
  const runner: RunnerShard = {
    shard,
    stateDir,
    current: first,
    kill: () => runner.current.kill(),
    async restart() {
      await runner.current.kill()
      runner.current = await spawnListening(RUNNER_MAIN, args(first.port), env)
    },
  }
  return runner
}

/** Starts `conch router` with `args` (shards and any other flags). */
export function startRouter(args: string[]): Promise<Listening> {
  return spawnListening(ROUTER_MAIN, ['router', '--port', '0', '--log-level', 'warn', ...args], {})
}

/** `name=url,...` for the router's --shards. */
export function shardList(runners: readonly RunnerShard[]): string {
  return runners.map((r) => `${r.shard}=${r.current.url}`).join(',')
}

/** SIGKILLs every process whose command line mentions `dir`, and their descendants. */
export function sweepProcesses(dir: string): void {
  const table = new Map<number, { ppid: number; hit: boolean }>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'latin1')
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      table.set(Number(name), { ppid, hit: cmdline.includes(dir) })
    } catch {
      // The process ended while the table was read.
    }
  }
  const doomed = new Set([...table].filter(([, p]) => p.hit).map(([pid]) => pid))
  for (let grew = true; grew; ) {
    grew = false
    for (const [pid, p] of table) {
      if (!doomed.has(pid) && doomed.has(p.ppid)) {
        doomed.add(pid)
        grew = true
      }
    }
  }
  for (const pid of doomed) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
  }
}

/** Three runners and a router in front of them. */
export interface Cluster extends AsyncDisposable {
  readonly apiKey: string
  readonly runners: RunnerShard[]
  readonly router: Listening
  /** Starts another router over the same runners with extra flags (disposed with the cluster). */
  extraRouter(args: string[]): Promise<Listening>
}

/** Starts `count` runner shards (`conch-0`, …, each with `runnerArgs`) and a router over them. */
export async function startCluster(
  count = 3,
  routerArgs: string[] = [],
  runnerArgs: string[] = [],
): Promise<Cluster> {
  const root = mkdtempSync(join(tmpdir(), 'conch-router-'))
  const apiKey = `conch_${randomBytes(24).toString('hex')}`
  const started: Listening[] = []
  const runners: RunnerShard[] = []
  const dispose = async (): Promise<void> => {
    await Promise.all([...started, ...runners.map((r) => r.current)].map((p) => p.kill()))
    sweepProcesses(root)
    rmSync(root, { recursive: true, force: true, maxRetries: 5 })
  }
  try {
    runners.push(
      ...(await Promise.all(
        Array.from({ length: count }, (_, i) => startRunnerShard(`conch-${i}`, apiKey, root, runnerArgs)),
      )),
    )
    const router = await startRouter([
      '--shards',
      shardList(runners),
      '--poll-interval-ms',
      '200',
      ...routerArgs,
    ])
    started.push(router)
    return {
      apiKey,
      runners,
      router,
      async extraRouter(args) {
        const extra = await startRouter(['--shards', shardList(runners), ...args])
        started.push(extra)
        return extra
      },
      [Symbol.asyncDispose]: dispose,
    }
  } catch (error) {
    await dispose()
    throw error
  }
}
