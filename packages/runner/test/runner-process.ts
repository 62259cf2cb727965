// The `conch` CLI as a child process, for tests that need a real runner process.
import { type ChildProcess, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))

/** A `conch` CLI child process. */
export interface Cli extends AsyncDisposable {
  child: ChildProcess
  out: () => string
  err: () => string
  exited: Promise<number | null>
  waitFor: (pattern: RegExp) => Promise<RegExpExecArray>
}

/**
 * Spawns `conch <args>` with `env` over the test's environment minus CONCH_ variables. The warm
 * pool is off unless `env` or `args` turn it on: tests that kill a runner would leave its pooled
 * sandboxes to a next start that never comes.
 */
export function cli(args: string[], env: Record<string, string> = {}): Cli {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CONCH_')))
  const child = spawn(process.execPath, ['--conditions=source', MAIN, ...args], {
    env: { ...clean, CONCH_WARM_POOL: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  const waiters: (() => void)[] = []
  child.stdout?.on('data', (d) => {
    out += d
    for (const w of waiters) w()
  })
  child.stderr?.on('data', (d) => {
    err += d
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return {
    child,
    out: () => out,
    err: () => err,
    exited,
    waitFor: (pattern) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const m = pattern.exec(out)
          if (m) resolve(m)
        }
        waiters.push(check)
        check()
        void exited.then(() => reject(new Error(`exited before ${pattern}: ${out}\n${err}`)))
      }),
    async [Symbol.asyncDispose]() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}

/** Starts `conch runner` on port 0 and resolves with its URL once it listens. */
export async function runnerProcess(
  stateDir: string,
  apiKey: string,
  extra: string[] = [],
): Promise<Cli & { url: string }> {
  // The local driver unless a test passes --driver: its agents are found by their state dir when
  // a test kills the runner. These tests are about the API, not isolation, so they allow the
  // local driver as root; the namespace driver and driver choice have their own tests.
  const run = cli(['runner', '--port', '0', '--state-dir', stateDir, '--log-level', 'warn', ...extra], {
    CONCH_API_KEY: apiKey,
    CONCH_DRIVER: 'local',
    CONCH_UNSAFE_LOCAL: '1',
  })
  const [, url] = await run.waitFor(/listening on (http:\/\/[\d.:]+)/)
  return Object.assign(run, { url: url! })
}

/** Resident memory of a process in bytes (Linux). */
export async function rssOf(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises')
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
}

/** Stops every agent recorded in a state dir, with the driver that made it, and removes the dir. */
export async function destroyStateDir(stateDir: string): Promise<void> {
  const { LocalDriver } = await import('../src/drivers/local-driver.ts')
  const { NamespaceDriver } = await import('../src/drivers/namespace-driver.ts')
  const { StateStore } = await import('../src/state-store.ts')
  const { rmSync } = await import('node:fs')
  const drivers = { local: new LocalDriver({ stateDir }), namespace: new NamespaceDriver({ stateDir }) }
  const store = StateStore.open(stateDir)
  for (const s of store.listSandboxes()) {
    const driver = s.driver === 'namespace' ? drivers.namespace : drivers.local
    await driver.destroy({ id: s.id, workdir: s.workdir, state: s.driverState })
  }
  // A runner killed with a warm pool leaves its pooled sandboxes recorded beside them.
  const { WARM_POOL_META_KEY } = await import('../src/pool-record.ts')
  const pooled = JSON.parse(store.getMeta(WARM_POOL_META_KEY) ?? '[]') as {
    driver: string
    handle: { id: string; workdir: string; state: Record<string, unknown> }
  }[]
  for (const { driver, handle } of pooled) {
    await (driver === 'namespace' ? drivers.namespace : drivers.local).destroy(handle)
  }
  store.close()
  rmSync(stateDir, { recursive: true, force: true })
}
