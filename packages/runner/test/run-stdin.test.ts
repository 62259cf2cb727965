import { Sandbox } from '@conch/sdk'
import { describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { baseUrl, startRunner } from './runner-fixture.ts'

// Interactive stdin for shell runs through the runner and the SDK: `stdin: 'pipe'` answers a
// prompt while the run is in flight; stdin for another client's run, or for none, is refused.

describe('interactive stdin for shell runs', () => {
  it("answers read -p 'name? ' through sh.run(cmd, { stdin: 'pipe' }), and end() gives EOF", async () => {
    await using runner = await startRunner({ listen: true })
    await using sb = await Sandbox.create({ url: baseUrl(runner.app), apiKey: runner.apiKey, WebSocket })
    await using sh = await sb.shell()
    const hi = sh.run("read -p 'name? ' n; echo hi $n", { stdin: 'pipe' })
    hi.write('bob\n')
    expect((await hi).stdout).toBe('hi bob\n')

    const lines = sh.run('while read -r l; do echo "<$l>"; done; echo eof', { stdin: 'pipe' })
    lines.write('a\n')
    lines.write(new TextEncoder().encode('b\n'))
    lines.end('c\n')
    expect((await lines).stdout).toBe('<a>\n<b>\n<c>\neof\n')
    // The default is still /dev/null: nothing waits on input by accident.
    expect((await sh.run('cat; echo done')).stdout).toBe('done\n')
    // A run that waits on a pipe nobody feeds is stopped by its timeout, and the shell goes on.
    const stuck = sh.run('read x; echo never', { stdin: 'pipe', timeoutMs: 1_000 })
    expect(await stuck).toMatchObject({ timedOut: true })
    expect((await sh.run('echo alive')).stdout).toBe('alive\n')
  })

  it('attacks: stdin for a run that is not in flight on this socket, bad base64, or too large, gets BAD_REQUEST', async () => {
    await using runner = await startRunner({ listen: true })
    const url = baseUrl(runner.app).replace('http', 'ws')
    const created = await runner.app.inject({
      method: 'POST',
      url: '/v1/sandboxes',
      headers: runner.auth,
      payload: {},
    })
    const id = (created.json() as { id: string }).id
    const ws = new WebSocket(`${url}/v1/sandboxes/${id}/shell`, ['conch.v1', `bearer.${runner.apiKey}`])
    const frames: Record<string, unknown>[] = []
    const waiters = new Set<() => void>()
    ws.on('message', (data) => {
      frames.push(JSON.parse(String(data)) as Record<string, unknown>)
      for (const w of waiters) w()
    })
    const until = (n: number) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (frames.filter((f) => f.type === 'error').length < n) return
          waiters.delete(check)
          resolve()
        }
        waiters.add(check)
        check()
      })
    await new Promise((r) => ws.once('open', r))
    ws.send(JSON.stringify({ type: 'shell_stdin', id: 'nobody', data: 'x' }))
    ws.send(
      JSON.stringify({ type: 'shell_run', id: 'r1', command: 'sleep 5', stdinPipe: true, stdin: 'both' }),
    )
    ws.send(JSON.stringify({ type: 'shell_run', id: 'r2', command: 'read x; echo $x', stdinPipe: true }))
    ws.send(JSON.stringify({ type: 'shell_stdin', id: 'r2', data: '!!!not base64', encoding: 'base64' }))
    ws.send(JSON.stringify({ type: 'shell_stdin', id: 'r2', data: 'x'.repeat(1_100_000) }))
    await until(4)
    const errors = frames.filter((f) => f.type === 'error')
    expect(errors.map((f) => [f.id, f.code])).toEqual([
      ['nobody', 'BAD_REQUEST'],
      ['r1', 'BAD_REQUEST'],
      ['r2', 'BAD_REQUEST'],
      ['r2', 'BAD_REQUEST'],
    ])
    await new Promise<void>((resolve) => {
      const check = () => {
        if (frames.some((f) => f.type === 'shell_start' && f.id === 'r2')) resolve()
      }
      waiters.add(check)
      check()
    })
    ws.send(JSON.stringify({ type: 'shell_stdin', id: 'r2', data: 'ok\n', end: true }))
    await new Promise<void>((resolve) => {
      const check = () => {
        if (frames.some((f) => f.type === 'shell_exit' && f.id === 'r2')) resolve()
      }
      waiters.add(check)
      check()
    })
    expect(
      frames
        .filter((f) => f.type === 'shell_out' && f.id === 'r2')
        .map((f) => f.data)
        .join(''),
    ).toBe('ok\n')
    ws.close()
  })
})
