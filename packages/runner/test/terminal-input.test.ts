import { createHash, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Socket } from 'node:net'
import { Sandbox } from '@conch/sdk'
import { describe, expect, it, vi } from 'vitest'
import { WebSocket } from 'ws'
import { baseUrl, startRunner, type TestRunner } from './runner-fixture.ts'
import { rssOf } from './runner-process.ts'
import { screenOf } from './terminal-screen.ts'
import { rawSocket } from './terminal-socket-client.ts'

// Input a terminal's program is not reading, through the real runner (local driver, a real
// agent and node-pty): the agent returns credit only as the pty takes input, and the runner stops
// reading the client's socket once a window of input waits, so a paste of any size waits in
// the client, never in the agent's or the runner's memory, and arrives whole once the program
// reads.

/** Raw mode, then waits for SIGCONT before it reads `n` bytes and prints their sha256. */
function readsAfterSignal(n: number): string[] {
  const script = [
    'import hashlib, os, signal, tty',
    'tty.setraw(0)',
    'signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCONT})',
    "print('waiting', end='\\r\\n', flush=True)",
    'signal.sigwait({signal.SIGCONT})',
    `h, left = hashlib.sha256(), ${n}`,
    'while left > 0:',
    '    b = os.read(0, min(left, 65536))',
    '    h.update(b)',
    '    left -= len(b)',
    "print('got', h.hexdigest(), end='\\r\\n', flush=True)",
  ].join('\n')
  return ['python3', '-c', script]
}

/** The parent of a process: the agent, for a terminal's program. */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

/**
 * A second client on a terminal's socket, to paste. The test watches its send buffer, and the
 * runner's end of it (`served`, from the server's `upgrade`) to see the runner pause it.
 */
async function pasterOn(
  runner: TestRunner,
  sandbox: string,
  terminal: string,
): Promise<{ ws: WebSocket; served: Socket }> {
  const upgraded = new Promise<Socket>((resolve) =>
    runner.app.server.once('upgrade', (_req, socket: Socket) => resolve(socket)),
  )
  const url = baseUrl(runner.app).replace('http', 'ws')
  const sock = rawSocket(`${url}/v1/sandboxes/${sandbox}/terminals/${terminal}/socket`, runner.apiKey)
  await sock.frame((f) => f.type === 'terminal_ready')
  return { ws: sock.ws, served: await upgraded }
}

/** Sends `bytes` in input messages of 64 KiB. */
function paste(ws: WebSocket, bytes: Uint8Array): void {
  for (let at = 0; at < bytes.byteLength; at += 64 * 1024) ws.send(bytes.subarray(at, at + 64 * 1024))
}

describe('terminal input a program is not reading', () => {
  it('attack: a 32 MiB paste waits in the client, not in the agent, and arrives whole once the program reads', async () => {
    await using runner = await startRunner({ listen: true })
    await using sb = await Sandbox.create({ url: baseUrl(runner.app), apiKey: runner.apiKey, WebSocket })
    const input = randomBytes(32 * 1024 * 1024)
    const term = await sb.terminal({ command: readsAfterSignal(input.byteLength) })
    const { until } = screenOf(term)
    await until(/waiting\r\n/)
    const agentPid = parentOf(term.info.pid)
    const before = await rssOf(agentPid)
    const { ws: paster, served } = await pasterOn(runner, sb.id, term.id)
    paste(paster, input)
    // The runner stops reading the pasting client's socket once a window waits for credit.
    await vi.waitFor(() => expect(served.isPaused()).toBe(true))
    expect((await rssOf(agentPid)) - before).toBeLessThan(16 * 1024 * 1024)
    // Most of the paste stays in the client (the rest in kernel socket buffers and the one
    // window the runner and the agent may hold).
    expect(paster.bufferedAmount).toBeGreaterThan(16 * 1024 * 1024)

    await term.signal('SIGCONT')
    const screen = await until(/got [0-9a-f]{64}\r\n/)
    expect(screen).toContain(`got ${createHash('sha256').update(input).digest('hex')}`)
    expect(paster.bufferedAmount).toBe(0)
    paster.close()
    await term.close()
  })

  it('attack: a client that pastes into it and goes away while its socket is paused releases the sandbox', async () => {
    await using runner = await startRunner({ listen: true, limits: { heartbeatIntervalMs: 100 } })
    await using sb = await Sandbox.create({ url: baseUrl(runner.app), apiKey: runner.apiKey, WebSocket })
    const term = await sb.terminal({ command: readsAfterSignal(1) })
    await screenOf(term).until(/waiting\r\n/)
    const sandbox = runner.app.conch.manager.get(sb.id)
    const attached = sandbox.attached
    const { ws: paster, served } = await pasterOn(runner, sb.id, term.id)
    expect(sandbox.attached).toBe(attached + 1)
    paste(paster, randomBytes(8 * 1024 * 1024))
    // The runner stopped reading: input piles up in the client.
    await vi.waitFor(() => expect(served.isPaused()).toBe(true))
    expect(paster.bufferedAmount).toBeGreaterThan(1024 * 1024)
    paster.terminate()
    // Only a write finds a client gone from a socket nobody reads: the runner's pings do.
    await vi.waitFor(() => expect(sandbox.attached).toBe(attached), { timeout: 10_000 })
    await term.close()
  })
})
