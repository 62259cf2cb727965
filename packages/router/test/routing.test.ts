import { shardOfSandboxId } from '@conch/protocol'
import { ConnectionError, Sandbox } from '@conch/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { codeOf, nextFrame, openShell, rawRequest } from './raw-http.ts'
import { type Cluster, startCluster } from './runner-cluster.ts'

let cluster: Cluster
const connect = (): { url: string; apiKey: string } => ({ url: cluster.router.url, apiKey: cluster.apiKey })

beforeAll(async () => {
  cluster = await startCluster(3)
})
afterAll(async () => {
  await cluster?.[Symbol.asyncDispose]()
})

describe('the router over three runners', () => {
  it('places new sandboxes on the least-loaded ready runner', async () => {
    // Two sandboxes made on conch-0 directly, before a router that polls only at start: it must
    // see that load and fill conch-1 and conch-2 first.
    const direct = { url: cluster.runners[0]!.current.url, apiKey: cluster.apiKey }
    const preloaded = [await Sandbox.create(direct), await Sandbox.create(direct)]
    const router = await cluster.extraRouter(['--poll-interval-ms', '3600000'])
    const placed: Sandbox[] = []
    for (let i = 0; i < 4; i++) placed.push(await Sandbox.create({ url: router.url, apiKey: cluster.apiKey }))
    // Each runner reports its shard and its load on /readyz, which is what the router read.
    const ready = JSON.parse((await rawRequest(cluster.runners[0]!.current.url, 'GET', '/readyz')).body)
    expect(ready).toMatchObject({ ok: true, shard: 'conch-0', load: { sandboxes: 2, maxSandboxes: 32 } })
    const shards = placed.map((s) => shardOfSandboxId(s.id))
    expect(shards.filter((s) => s === 'conch-0')).toEqual([])
    expect(shards.filter((s) => s === 'conch-1')).toHaveLength(2)
    expect(shards.filter((s) => s === 'conch-2')).toHaveLength(2)
    for (const s of [...preloaded, ...placed]) await s.destroy()
  })

  it('forwards REST, files and exec to the shard the id names, through the SDK unchanged', async () => {
    const sandbox = await Sandbox.create(connect())
    expect(shardOfSandboxId(sandbox.id)).toMatch(/^conch-[0-2]$/)
    await sandbox.files.write('note.txt', 'through the router\n')
    expect(await sandbox.files.read('note.txt')).toBe('through the router\n')
    const result = await sandbox.exec('cat note.txt; echo err >&2; exit 7')
    expect(result).toMatchObject({ stdout: 'through the router\n', stderr: 'err\n', exitCode: 7 })
    // The runner that holds it answers for it directly too: the router invented nothing.
    const holder = cluster.runners.find((r) => r.shard === shardOfSandboxId(sandbox.id))!
    const direct = await Sandbox.connect(sandbox.id, { url: holder.current.url, apiKey: cluster.apiKey })
    expect(await direct.files.read('note.txt')).toBe('through the router\n')
    await sandbox.destroy()
    const gone = await rawRequest(cluster.router.url, 'GET', `/v1/sandboxes/${sandbox.id}`, {
      authorization: `Bearer ${cluster.apiKey}`,
    })
    expect([gone.status, codeOf(gone)]).toEqual([404, 'SANDBOX_NOT_FOUND'])
  })

  it('lists the sandboxes of every shard in one answer', async () => {
    const made = await Promise.all(
      [0, 1, 2].map((i) => Sandbox.create({ url: cluster.runners[i]!.current.url, apiKey: cluster.apiKey })),
    )
    const listed = await Sandbox.list(connect())
    const ids = listed.map((s) => s.id)
    for (const s of made) expect(ids).toContain(s.id)
    expect(new Set(listed.map((s) => shardOfSandboxId(s.id)))).toEqual(
      new Set(['conch-0', 'conch-1', 'conch-2']),
    )
    // A wrong key is refused as the runners refuse it, not answered with an empty list.
    const wrong = await rawRequest(cluster.router.url, 'GET', '/v1/sandboxes', {
      authorization: 'Bearer conch_wrong_key_0123456789',
    })
    expect([wrong.status, codeOf(wrong)]).toEqual([401, 'UNAUTHORIZED'])
    for (const s of made) await s.destroy()
  })

  it('relays the shell socket and reattaches by sessionId from offset 0', async () => {
    const sandbox = await Sandbox.create(connect())
    const sh = await sandbox.shell()
    await sh.run('export ROUTED=yes; cd /tmp')
    expect((await sh.run('echo first-$ROUTED')).stdout).toBe('first-yes\n')
    const sessionId = sh.sessionId
    sh.close()
    // Another client, through the router, reattaches to the same bash and replays its output.
    const other = await Sandbox.connect(sandbox.id, connect())
    const replayed: string[] = []
    const again = await other.reattachShell(sessionId, {
      offset: 0,
      onOutput: (o) => replayed.push(new TextDecoder().decode(o.data)),
    })
    expect((await again.run('echo $ROUTED $(pwd)')).stdout).toBe('yes /tmp\n')
    expect(replayed.join('')).toContain('first-yes')
    // Output larger than the relay's buffers arrives whole and in order.
    let streamed = 0
    let lastLine = ''
    const big = await again.run('seq 1 400000', {
      onStdout: (chunk: string) => {
        streamed += chunk.length
        lastLine = (lastLine + chunk).slice(-16)
      },
    })
    expect(big.exitCode).toBe(0)
    expect(streamed).toBe(Array.from({ length: 400000 }, (_, i) => `${i + 1}\n`).join('').length)
    expect(lastLine.endsWith('\n399999\n400000\n')).toBe(true)
    again.close()
    await sandbox.destroy()
  })

  it('answers RUNNER_UNAVAILABLE while a runner is down and serves its sandboxes again after it restarts', async () => {
    const runner = cluster.runners[1]!
    const sandbox = await Sandbox.create({ url: runner.current.url, apiKey: cluster.apiKey })
    const viaRouter = await Sandbox.connect(sandbox.id, connect())
    const sh = await viaRouter.shell()
    await sh.run('export KEPT=across-restart')
    const raw = await openShell(cluster.router.url, sandbox.id, cluster.apiKey, {
      query: `sessionId=${sh.sessionId}`,
    })
    if (raw.kind !== 'open') throw new Error(`shell refused: ${raw.status} ${raw.body}`)
    await nextFrame(raw, (f) => f.type === 'shell_ready')
    raw.ws.send(JSON.stringify({ type: 'shell_run', id: 'r1', command: 'sleep 600' }))
    sh.close()

    await runner.kill()
    // The socket whose runner died is closed with a code, not left hanging.
    expect(await raw.closed).toEqual({ code: 4503, reason: 'RUNNER_UNAVAILABLE' })
    const auth = { authorization: `Bearer ${cluster.apiKey}` }
    const get = await rawRequest(cluster.router.url, 'GET', `/v1/sandboxes/${sandbox.id}`, auth)
    expect([get.status, codeOf(get)]).toEqual([503, 'RUNNER_UNAVAILABLE'])
    expect(JSON.parse(get.body).error.message).toMatch(/runner shard conch-1 is not answering/)
    const list = await rawRequest(cluster.router.url, 'GET', '/v1/sandboxes', auth)
    expect([list.status, codeOf(list)]).toEqual([503, 'RUNNER_UNAVAILABLE'])
    const shell = await openShell(cluster.router.url, sandbox.id, cluster.apiKey)
    expect(shell.kind === 'refused' && [shell.status, JSON.parse(shell.body).error.code]).toEqual([
      503,
      'RUNNER_UNAVAILABLE',
    ])
    await expect(viaRouter.exec('true')).rejects.toBeInstanceOf(ConnectionError)
    // New sandboxes go to the runners that answer.
    const elsewhere = await Sandbox.create(connect())
    expect(shardOfSandboxId(elsewhere.id)).not.toBe('conch-1')
    await elsewhere.destroy()

    await runner.restart()
    const back = await viaRouter.reattachShell(sh.sessionId)
    // The session's `sleep 600` ran on through the restart: interrupt it instead of waiting
    // for its run timeout, then the session serves the next command with its state.
    await back.interrupt()
    expect((await back.run('echo $KEPT')).stdout).toBe('across-restart\n')
    back.close()
    await sandbox.destroy()
  })
})
