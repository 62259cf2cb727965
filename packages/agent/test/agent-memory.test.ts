// The agent's memory stays flat under sustained load: what a run leaves behind (its output
// records, history entry, bookkeeping) is bounded by bytes, so after the scrollback has filled
// the live heap no longer grows with the number of runs. A real agent process (started with the
// drivers' node flags plus --expose-gc, so `agent.info` reports the heap after a full GC) runs
// checked commands pipelined over its socket, with a channel attached as the runner does.
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { AGENT_NODE_FLAGS } from '@conch/protocol'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { describe, expect, it } from 'vitest'
import { AgentClient } from './agent-client.ts'

const here = dirname(fileURLToPath(import.meta.url))

/**
 * Runs after the warm-up; the heap is compared before and after them. 60k rather than 100k
 * keeps the test near a minute on a loaded 2-core machine (100k took 50-110 s there); the code
 * that kept every run's records grew by about 450 bytes a run, 27 MB over these runs, far past
 * the bound.
 */
const RUNS = 60_000
/** Enough runs to fill the default 8 MiB scrollback at what a tiny run counts for. */
const WARMUP_RUNS = 15_000
/** Runs in flight at once. */
const WINDOW = 64
/** Live-heap growth allowed over the measured runs: noise, not a per-run cost (60k × 70 B). */
const HEAP_BOUND_BYTES = 4 * 1024 * 1024

interface RunResultWire {
  stdout: string
  exitCode: number
}

async function startAgent(dir: string) {
  const root = join(dir, 'root')
  mkdirSync(root)
  const socketPath = join(dir, 'agent.sock')
  const agent = spawn(
    process.execPath,
    [
      ...AGENT_NODE_FLAGS,
      '--expose-gc',
      '--conditions=source',
      join(here, '..', 'src', 'main.ts'),
      '--socket',
      socketPath,
      '--secretFd',
      '3',
      '--root',
      root,
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root },
    },
  )
  const secret = mintLinkSecret()
  const secretPipe = agent.stdio[3]
  if (secretPipe instanceof Writable) secretPipe.end(secret)
  let log = ''
  await new Promise<void>((resolve, reject) => {
    agent.stderr?.on('data', (d: Buffer) => {
      log += d.toString()
      if (log.includes('agent listening')) resolve()
    })
    agent.once('exit', (code) => reject(new Error(`agent exited with ${code}: ${log}`)))
  })
  const client = await AgentClient.connect(socketPath, secret)
  return {
    client,
    [Symbol.asyncDispose]: async () => {
      client.close()
      const exited = new Promise((resolve) => agent.once('exit', resolve))
      agent.kill('SIGTERM')
      await exited
    },
  }
}

describe('bounded memory: the agent under sustained load', () => {
  it('keeps its live heap within a fixed bound of its warm-up size after 60k more runs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-agent-memory-'))
    try {
      await using agent = await startAgent(dir)
      const { client } = agent
      // An attached channel, granting credit for what it receives, as the runner does.
      client.onFrame = (f) => {
        if (f.type === 'shell_out' || f.type === 'shell_err')
          client.send({ type: 'credit', ch: f.ch, bytes: f.payload.byteLength })
        return false
      }
      await client.call('session.attach', { sessionId: 'default', ch: 1 })
      let next = 0
      let mismatches = 0
      const runUntil = async (end: number): Promise<void> => {
        const worker = async (): Promise<void> => {
          while (next < end) {
            const i = next++
            const r = await client.call<RunResultWire>('session.run', {
              sessionId: 'default',
              id: `m${i}`,
              command: `echo run-${i}`,
              buffer: true,
            })
            if (r.exitCode !== 0 || Buffer.from(r.stdout, 'base64').toString() !== `run-${i}\n`)
              mismatches += 1
          }
        }
        await Promise.all(Array.from({ length: WINDOW }, worker))
      }
      const heap = async () => (await client.call<{ heapUsedBytes: number }>('agent.info', {})).heapUsedBytes

      await runUntil(WARMUP_RUNS)
      const warm = await heap()
      await runUntil(WARMUP_RUNS + RUNS)
      const after = await heap()

      expect(mismatches).toBe(0)
      expect(
        after - warm,
        `live heap ${warm} B after warm-up, ${after} B after ${RUNS} more runs`,
      ).toBeLessThan(HEAP_BOUND_BYTES)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)
})
