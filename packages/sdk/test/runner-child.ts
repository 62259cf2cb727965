import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

// The real runner CLI as a child process on port 0 with a fresh state directory, for tests
// that need the whole stack. It resolves once the runner prints its URL; disposing it stops the
// runner and removes the state directory. Sandboxes the test creates are the test's to destroy
// (agents outlive their runner by design).

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const RUNNER_MAIN = join(REPO_ROOT, 'packages/runner/src/main.ts')
const URL_PATTERN = /http:\/\/127\.0\.0\.1:\d+/

/** A running runner. */
export interface RunnerChild extends AsyncDisposable {
  /** Base URL. */
  url: string
  /** Its API key. */
  apiKey: string
  /** What it printed, for failure messages. */
  log(): string
}

/** Starts `conch runner --port 0` and waits for its URL. */
export async function startRunnerChild(): Promise<RunnerChild> {
  const stateDir = mkdtempSync(join(tmpdir(), 'conch-sdk-test-'))
  const apiKey = `conch_${randomBytes(24).toString('hex')}`
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CONCH_')) env[k] = v
  env.CONCH_API_KEY = apiKey
  // These tests are about the SDK, not isolation: the local driver's agents are found and
  // stopped by their state dir when the runner is killed, so they allow it even as root.
  // tests-e2e covers the default driver.
  env.CONCH_DRIVER = 'local'
  env.CONCH_UNSAFE_LOCAL = '1'
  const child: ChildProcess = spawn(
    process.execPath,
    ['--conditions=source', RUNNER_MAIN, 'runner', '--port', '0', '--state-dir', stateDir],
    { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let log = ''
  const exited = once(child, 'exit')
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      await exited
    }
    rmSync(stateDir, { recursive: true, force: true, maxRetries: 5 })
  }
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`runner printed no URL in 45 s:\n${log}`)), 45_000)
      const onData = (chunk: Buffer) => {
        log = (log + chunk.toString('utf8')).slice(-16_384)
        const match = URL_PATTERN.exec(log)
        if (match) {
          clearTimeout(timer)
          resolve(match[0])
        }
      }
      child.stdout?.on('data', onData)
      child.stderr?.on('data', onData)
      void exited.then(() => {
        clearTimeout(timer)
        reject(new Error(`runner exited before listening:\n${log}`))
      })
    })
    return { url, apiKey, log: () => log, [Symbol.asyncDispose]: stop }
  } catch (err) {
    await stop()
    throw err
  }
}
