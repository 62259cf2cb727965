// Attacks on the sandbox's run queue through the shell WebSocket: every run a socket sends holds
// one slot of `maxQueuedRunsPerSandbox` until its exit, its failure, the shell's close or the
// socket's end, whichever comes first, and frees it exactly once. A slot freed twice would let a
// client run past the limit; one never freed would lock the sandbox out. Each test drives one of
// those ends (several at once where they race), then fills the queue from a fresh socket: exactly
// the limit must be admitted, and the next run refused with RATE_LIMITED.
import { describe, expect, it } from 'vitest'
import { createSandbox, shellUrl, startRunner, type TestRunner } from '../runner-fixture.ts'
import { type Frame, ShellClient } from '../shell-client.ts'

const LIMIT = 3

/** Waits for a file `go` in the sandbox's workspace, then prints `id`. */
const blocked = (id: string) => `while [ ! -e go ]; do sleep 0.02; done; echo ${id}`

async function openShell(runner: TestRunner, id: string, query = '') {
  const client = await ShellClient.open(shellUrl(runner, id, query), runner.apiKey)
  const ready = await client.nextOf('shell_ready')
  await client.nextOf('scrollback_end')
  return { client, sessionId: String(ready.sessionId) }
}

async function exec(runner: TestRunner, id: string, command: string): Promise<void> {
  const res = await runner.app.inject({
    method: 'POST',
    url: `/v1/sandboxes/${id}/exec`,
    headers: runner.auth,
    payload: { command },
  })
  expect(res.statusCode).toBe(200)
}

/** The frame that answers run `id`: its exit or its error. */
function answer(client: ShellClient, id: string): Promise<Frame> {
  return client.next((f) => f.id === id && (f.type === 'shell_exit' || f.type === 'error'))
}

/**
 * From a fresh socket on a new session: LIMIT runs are admitted (one runs, the others queue
 * behind it) and one more is refused with RATE_LIMITED; then they all finish (the first
 * interrupted: an exec to unblock it would need a slot itself).
 */
async function expectExactlyTheLimit(runner: TestRunner, id: string): Promise<void> {
  await using client = (await openShell(runner, id)).client
  client.send({ type: 'shell_run', id: 'fill0', command: 'while :; do sleep 0.02; done' })
  for (let i = 1; i < LIMIT; i++) client.send({ type: 'shell_run', id: `fill${i}`, command: 'true' })
  client.send({ type: 'shell_run', id: 'over', command: 'echo over' })
  expect(await client.nextOf('error', 'over')).toMatchObject({ code: 'RATE_LIMITED' })
  await client.nextOf('shell_start', 'fill0')
  client.send({ type: 'shell_interrupt', id: 'fill0' })
  expect(await answer(client, 'fill0')).toMatchObject({ type: 'shell_exit', code: 130 })
  for (let i = 1; i < LIMIT; i++)
    expect(await answer(client, `fill${i}`)).toMatchObject({ type: 'shell_exit', code: 0 })
  // The slots are free again.
  expect((await client.run('after', 'echo after')).stdout).toBe('after\n')
}

describe('attack: free a run-queue slot twice, or never', () => {
  it('frees each slot once across exits, refused runs and a run id reused in flight', async () => {
    await using runner = await startRunner({ listen: true, limits: { maxQueuedRunsPerSandbox: LIMIT } })
    const id = await createSandbox(runner)
    await using client = (await openShell(runner, id)).client
    // Exits, many times over the limit: a slot that leaked would soon refuse these.
    for (let i = 0; i < LIMIT * 3; i++) expect((await client.run(`r${i}`, 'true')).code).toBe(0)
    // Refused by the runner before any slot is taken: a reused id in flight, a bad base64 stdin.
    client.send({ type: 'shell_run', id: 'held', command: blocked('held') })
    await client.nextOf('shell_start', 'held')
    for (let i = 0; i < LIMIT * 2; i++) {
      client.send({ type: 'shell_run', id: 'held', command: 'echo again' })
      expect(await client.nextOf('error', 'held')).toMatchObject({ code: 'BAD_REQUEST' })
      client.send({ type: 'shell_run', id: `bad${i}`, command: 'true', stdin: '@@', stdinEncoding: 'base64' })
      expect(await client.nextOf('error', `bad${i}`)).toMatchObject({ code: 'BAD_REQUEST' })
    }
    await exec(runner, id, 'touch go')
    expect(await answer(client, 'held')).toMatchObject({ type: 'shell_exit', code: 0 })
    await expectExactlyTheLimit(runner, id)
  })

  it('frees the slots of runs queued behind an `exit` once, though the shell closing and the agent failing them both end them', async () => {
    await using runner = await startRunner({ listen: true, limits: { maxQueuedRunsPerSandbox: LIMIT } })
    const id = await createSandbox(runner)
    for (let round = 0; round < 3; round++) {
      await using client = (await openShell(runner, id)).client
      // One tick: the `exit` and the runs queued behind it; the shell closes under them.
      client.ws.send(JSON.stringify({ type: 'shell_run', id: 'bye', command: 'exit 0' }))
      client.ws.send(JSON.stringify({ type: 'shell_run', id: 'q1', command: 'true' }))
      client.ws.send(JSON.stringify({ type: 'shell_run', id: 'q2', command: 'true' }))
      await client.nextOf('shell_closed')
      // Later runs on the closed shell are refused without a slot.
      client.send({ type: 'shell_run', id: 'late', command: 'true' })
      expect(await client.nextOf('error', 'late')).toMatchObject({ code: 'SHELL_CLOSED' })
    }
    await expectExactlyTheLimit(runner, id)
  })

  it('frees the slots of a socket that closes mid-run once, when another socket sees those runs end', async () => {
    await using runner = await startRunner({ listen: true, limits: { maxQueuedRunsPerSandbox: LIMIT } })
    const id = await createSandbox(runner)
    const first = await openShell(runner, id)
    await using watcher = (await openShell(runner, id, `?sessionId=${first.sessionId}`)).client
    first.client.send({ type: 'shell_run', id: 'a', command: blocked('a') })
    first.client.send({ type: 'shell_run', id: 'b', command: blocked('b') })
    await first.client.nextOf('shell_start', 'a')
    await first.client[Symbol.asyncDispose]()
    // The runs go on; their ends reach the watcher, which must not free their slots again.
    await exec(runner, id, 'touch go')
    await watcher.nextOf('shell_exit', 'a')
    await watcher.nextOf('shell_exit', 'b')
    await expectExactlyTheLimit(runner, id)
  })
})
