// Attack: one sandbox keeps the whole runner from restarting. Its agent is stopped with SIGSTOP
// (or its socket accepts and never answers), the runner is SIGKILLed and started again. The
// runner must answer at once, serve the other sandboxes, report the silent one `unreachable`
// with the reason, and take it back when its agent answers again.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, unlinkSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { ErrorBody, RunResult, SandboxInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { generateApiKey } from '../../src/credentials.ts'
import { LocalDriver } from '../../src/drivers/local-driver.ts'
import { descendantsOf } from '../../src/drivers/proc-stat.ts'
import { StateStore } from '../../src/state-store.ts'
import { type Cli, cli, destroyStateDir, runnerProcess } from '../runner-process.ts'

/** How long a restarted runner may take, from spawn, to answer /healthz. */
const HEALTHY_WITHIN_MS = 2_000

/** Resolves with `promise`, or rejects with `what` once `deadline` (ms since the epoch) has passed. */
async function beforeDeadline<T>(promise: Promise<T>, deadline: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not happen within its deadline`)),
      Math.max(0, deadline - Date.now()),
    )
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** Spawns the runner CLI and resolves with its URL once /healthz answers, before `deadline`. */
async function healthyRunner(
  stateDir: string,
  apiKey: string,
  args: string[],
  env: Record<string, string>,
): Promise<Cli & { url: string }> {
  const deadline = Date.now() + HEALTHY_WITHIN_MS
  const run = cli(['runner', '--port', '0', '--state-dir', stateDir, '--log-level', 'warn', ...args], {
    CONCH_API_KEY: apiKey,
    ...env,
  })
  const [, url] = await beforeDeadline(
    run.waitFor(/listening on (http:\/\/[\d.:]+)/),
    deadline,
    'the restarted runner listening',
  ).catch((error: Error) => {
    throw new Error(`${error.message}; it printed:\n${run.out()}\n${run.err()}`)
  })
  const health = await beforeDeadline(
    fetch(`${url}/healthz`),
    deadline,
    'the restarted runner answering /healthz',
  )
  expect(health.status).toBe(200)
  return Object.assign(run, { url: url! })
}

function api(url: string, apiKey: string) {
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  return {
    create: async (body: object): Promise<string> => {
      const res = await fetch(`${url}/v1/sandboxes`, { method: 'POST', headers, body: JSON.stringify(body) })
      expect(res.status).toBe(200)
      return SandboxInfo.parse(await res.json()).id
    },
    info: async (id: string) =>
      SandboxInfo.parse(await (await fetch(`${url}/v1/sandboxes/${id}`, { headers })).json()),
    exec: (id: string, command: string) =>
      fetch(`${url}/v1/sandboxes/${id}/exec`, { method: 'POST', headers, body: JSON.stringify({ command }) }),
  }
}

/** The agent below a namespace sandbox's first process: the node process serving the link fd. */
function agentBelow(sandboxPid: number): number {
  const agent = descendantsOf(sandboxPid).find((pid) => {
    try {
      // bwrap's own arguments name the agent's command too: the agent is the one that runs node.
      const [program, ...args] = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      return basename(program ?? '') === 'node' && args.includes('--listenFd')
    } catch {
      return false
    }
  })
  if (agent === undefined) throw new Error(`no agent below sandbox process ${sandboxPid}`)
  return agent
}

function storedSandbox(stateDir: string, id: string) {
  const store = StateStore.open(stateDir)
  try {
    const record = store.getSandbox(id)
    if (!record) throw new Error(`sandbox ${id} is not stored`)
    return record
  } finally {
    store.close()
  }
}

describe('startup never waits on a sandbox', () => {
  it('answers at once with one namespace agent stopped; the other runs commands; the stopped one is unreachable until SIGCONT', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-fault-'))
    const apiKey = generateApiKey()
    let stopped: number | undefined
    try {
      let healthy: string
      let silent: string
      {
        await using first = await runnerProcess(stateDir, apiKey, ['--driver', 'namespace'])
        const client = api(first.url, apiKey)
        healthy = await client.create({})
        silent = await client.create({})
        const pid = Number(storedSandbox(stateDir, silent).driverState.pid)
        stopped = agentBelow(pid)
        process.kill(stopped, 'SIGSTOP')
        first.child.kill('SIGKILL')
        await first.exited
      }

      await using second = await healthyRunner(stateDir, apiKey, ['--driver', 'namespace'], {})
      const client = api(second.url, apiKey)
      const ran = await client.exec(healthy, 'echo still here')
      expect(ran.status).toBe(200)
      expect(RunResult.parse(await ran.json())).toMatchObject({ stdout: 'still here\n', exitCode: 0 })

      await vi.waitFor(
        async () => {
          const info = await client.info(silent)
          expect(info.status).toBe('unreachable')
          expect(info.deadReason).toMatch(/did not answer hello/)
        },
        { timeout: 20_000, interval: 100 },
      )
      const refused = await client.exec(silent, 'true')
      expect(refused.status).toBe(503)
      const error = ErrorBody.parse(await refused.json()).error
      expect(error.code).toBe('AGENT_UNAVAILABLE')
      expect(error.message).toMatch(new RegExp(`sandbox ${silent} is unreachable`))

      process.kill(stopped, 'SIGCONT')
      await vi.waitFor(async () => expect((await client.info(silent)).status).toBe('running'), {
        timeout: 40_000,
        interval: 200,
      })
      const back = await client.exec(silent, 'echo back')
      expect(RunResult.parse(await back.json())).toMatchObject({ stdout: 'back\n', exitCode: 0 })
      expect((await client.info(silent)).deadReason).toBeNull()
    } finally {
      if (stopped !== undefined) {
        try {
          process.kill(stopped, 'SIGCONT')
        } catch {
          // already gone
        }
      }
      await destroyStateDir(stateDir)
    }
  }, 120_000)

  it('answers at once when an agent socket accepts and never answers; the other sandbox runs commands', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-fault-'))
    const apiKey = generateApiKey()
    const held: Socket[] = []
    const mute = createServer((socket) => held.push(socket))
    let standIn: ChildProcess | undefined
    try {
      let healthy: string
      let silent: string
      {
        await using first = await runnerProcess(stateDir, apiKey)
        const client = api(first.url, apiKey)
        healthy = await client.create({})
        silent = await client.create({})
        first.child.kill('SIGKILL')
        await first.exited
      }
      // The silent sandbox's agent is replaced by a live process and a socket that says nothing.
      const record = storedSandbox(stateDir, silent)
      await new LocalDriver({ stateDir }).stop({
        id: silent,
        workdir: record.workdir,
        state: record.driverState,
      })
      standIn = spawn('sleep', ['infinity'], { stdio: 'ignore' })
      const socketPath = join(String(record.driverState.socketDir), 'agent.sock')
      unlinkSync(socketPath)
      await new Promise<void>((resolve) => mute.listen(socketPath, resolve))
      const store = StateStore.open(stateDir)
      store.setDriverState(silent, { ...record.driverState, pid: standIn.pid })
      store.close()

      await using second = await healthyRunner(stateDir, apiKey, ['--driver', 'local'], {
        CONCH_UNSAFE_LOCAL: '1',
      })
      const client = api(second.url, apiKey)
      const ran = await client.exec(healthy, 'echo still here')
      expect(RunResult.parse(await ran.json())).toMatchObject({ stdout: 'still here\n', exitCode: 0 })
      await vi.waitFor(
        async () => {
          const info = await client.info(silent)
          expect(info.status).toBe('unreachable')
          expect(info.deadReason).toMatch(/did not answer hello/)
        },
        { timeout: 20_000, interval: 100 },
      )
      expect(held.length).toBeGreaterThan(0)
      const refused = await client.exec(silent, 'true')
      expect(refused.status).toBe(503)
      expect(ErrorBody.parse(await refused.json()).error.code).toBe('AGENT_UNAVAILABLE')
    } finally {
      for (const socket of held) socket.destroy()
      mute.close()
      standIn?.kill('SIGKILL')
      await destroyStateDir(stateDir)
    }
  }, 120_000)
})
