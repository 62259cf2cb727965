// The real runner CLI as a child process. `startRunner` spawns
// `node --conditions=source packages/runner/src/main.ts runner --port 0 --state-dir <dir>` with
// its own API key, and resolves once the runner prints the URL it listens on. Disposing the
// handle SIGKILLs the runner and sweeps every process it left behind (agents are detached and
// outlive their runner by design), then removes the state directory if the handle created it.

import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type SweepTarget, sweepProcesses } from './process-sweep.ts'
import { unmountUnder } from './state-dir-mounts.ts'

/** The repository root, resolved from this file. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))

const RUNNER_MAIN = join(REPO_ROOT, 'packages/runner/src/main.ts')
const URL_PATTERN = /http:\/\/127\.0\.0\.1:\d+/
const START_TIMEOUT_MS = 45_000
const LOG_TAIL_BYTES = 16_384

/** How to start a runner. */
export interface RunnerOptions {
  /** Reuse this state directory (a restart); a fresh temporary one is created otherwise. */
  stateDir?: string
  /** Reuse this API key (a restart); a random one is generated otherwise. */
  apiKey?: string
  /** Reuse this sweep marker (a restart), so one sweep finds the processes of both runs. */
  marker?: string
  /** Extra CLI flags after `runner`. */
  args?: readonly string[]
  /** Extra flags for node itself, before the entry file (`--cpu-prof`). */
  nodeArgs?: readonly string[]
  /** The runner's entry file; `packages/runner/src/main.ts` (no bin, so no node flags) by default. */
  entry?: string
}

/** How the runner process ended. */
export interface RunnerExit {
  code: number | null
  signal: NodeJS.Signals | null
}

/** A started runner. */
export interface RunnerProcess extends AsyncDisposable {
  /** Base URL, `http://127.0.0.1:<port>`. */
  readonly url: string
  /** The runner's API key. */
  readonly apiKey: string
  /** The runner's state directory. */
  readonly stateDir: string
  /** `NAME=value` carried by the runner; pass `sandboxEnv` to sandboxes so sweeps find them. */
  readonly marker: string
  /** Environment to give sandboxes so that the sweep finds their processes. */
  readonly sandboxEnv: Record<string, string>
  /** What finds the processes of this runner and its sandboxes. */
  readonly sweepTarget: SweepTarget
  /** The runner's pid. */
  readonly pid: number
  /** Resolves when the runner process exits. */
  readonly exited: Promise<RunnerExit>
  /** The last lines the runner wrote to stdout and stderr, for failure messages. */
  logTail(): string
  /** True until the runner process exits. */
  isRunning(): boolean
  /** Sends a signal to the runner alone and waits for it to exit. */
  kill(signal?: NodeJS.Signals): Promise<RunnerExit>
}

const MARKER_NAME = 'E2E_SWEEP_MARK'

/** Generates an API key in the runner's format. */
export function randomApiKey(): string {
  return `conch_${randomBytes(24).toString('hex')}`
}

function runnerEnv(apiKey: string, marker: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('CONCH_')) env[name] = value
  }
  const [markerName, markerValue] = marker.split('=') as [string, string]
  env.CONCH_API_KEY = apiKey
  // The suite runs against the runner's default driver unless CONCH_E2E_DRIVER names one; the
  // local driver is then allowed even as root (the suite tests the API, not isolation).
  if (process.env.CONCH_E2E_DRIVER) env.CONCH_DRIVER = process.env.CONCH_E2E_DRIVER
  if (process.env.CONCH_E2E_DRIVER === 'local') env.CONCH_UNSAFE_LOCAL = '1'
  env[markerName] = markerValue
  // No warm pool unless a caller's flag asks: a killed runner's pooled sandboxes carry no marker.
  env.CONCH_WARM_POOL = '0'
  return env
}

/** Removes a state directory the harness created, with the disks its sandboxes left mounted. */
function removeStateDir(stateDir: string): void {
  unmountUnder(stateDir)
  rmSync(stateDir, { recursive: true, force: true, maxRetries: 5 })
}

/** Starts the runner CLI and waits until it listens. */
export async function startRunner(options: RunnerOptions = {}): Promise<RunnerProcess> {
  const ownsStateDir = options.stateDir === undefined
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'conch-e2e-'))
  const apiKey = options.apiKey ?? randomApiKey()
  const marker = options.marker ?? `${MARKER_NAME}=${randomBytes(8).toString('hex')}`
  const target: SweepTarget = { stateDir, marker }

  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      '--conditions=source',
      options.entry ?? RUNNER_MAIN,
      'runner',
      '--port',
      '0',
      '--state-dir',
      stateDir,
      ...(options.args ?? []),
    ],
    { cwd: REPO_ROOT, env: runnerEnv(apiKey, marker), stdio: ['ignore', 'pipe', 'pipe'] },
  )

  let log = ''
  const exited = new Promise<RunnerExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })

  const url = await new Promise<string>((resolve, reject) => {
    let pending = ''
    let found = false
    const timer = setTimeout(() => {
      reject(new Error(`runner printed no URL within ${START_TIMEOUT_MS} ms:\n${log}`))
    }, START_TIMEOUT_MS)
    const onData = (chunk: Buffer): void => {
      const text = chunk.toString('utf8')
      log = (log + text).slice(-LOG_TAIL_BYTES)
      if (found) return
      pending += text
      const lines = pending.split('\n')
      pending = lines.pop() ?? ''
      for (const line of lines) {
        const match = URL_PATTERN.exec(line)
        if (match) {
          found = true
          clearTimeout(timer)
          resolve(match[0])
          return
        }
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    void exited.then(({ code, signal }) => {
      clearTimeout(timer)
      if (!found)
        reject(new Error(`runner exited (code ${code}, signal ${signal}) before listening:\n${log}`))
    })
  }).catch(async (error: unknown) => {
    child.kill('SIGKILL')
    await sweepProcesses(target)
    if (ownsStateDir) removeStateDir(stateDir)
    throw error
  })

  const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<RunnerExit> => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    return exited
  }

  const [markerName, markerValue] = marker.split('=') as [string, string]
  return {
    url,
    apiKey,
    stateDir,
    marker,
    sandboxEnv: { [markerName]: markerValue },
    sweepTarget: target,
    pid: child.pid ?? -1,
    exited,
    logTail: () => log,
    isRunning: () => child.exitCode === null && child.signalCode === null,
    kill,
    async [Symbol.asyncDispose]() {
      await kill('SIGKILL')
      await sweepProcesses(target)
      if (ownsStateDir) removeStateDir(stateDir)
    },
  }
}
