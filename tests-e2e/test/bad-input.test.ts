import { describe, expect } from 'vitest'
import { RawShellSocket } from './raw-shell-socket.ts'
import { test } from './runner-fixture.ts'

const MALFORMED: { name: string; text: string; code: string }[] = [
  { name: 'text that is not JSON', text: 'this is not json', code: 'INVALID_FRAME' },
  { name: 'a JSON array', text: '[1,2,3]', code: 'INVALID_FRAME' },
  { name: 'a JSON string', text: '"shell_run"', code: 'INVALID_FRAME' },
  { name: 'an unknown type', text: '{"type":"format_disk","id":"x"}', code: 'UNKNOWN_FRAME_TYPE' },
  { name: 'a frame without a type', text: '{"id":"x","command":"true"}', code: 'INVALID_FRAME' },
  { name: 'a run without a command', text: '{"type":"shell_run","id":"r-bad"}', code: 'INVALID_FRAME' },
  {
    name: 'a run with a command of the wrong type',
    text: '{"type":"shell_run","id":"r-bad2","command":42}',
    code: 'INVALID_FRAME',
  },
]

describe('bad input', () => {
  test('answers each malformed frame with an error frame and keeps the socket and shell usable', async ({
    runner,
    sandbox,
  }) => {
    await using socket = await RawShellSocket.connect({
      url: runner.url,
      sandboxId: sandbox.id,
      secret: runner.apiKey,
    })
    await socket.waitForType('scrollback_end')
    socket.send(JSON.stringify({ type: 'shell_run', id: 'r-setup', command: 'export E2E_KEEP=kept' }))
    expect(await socket.waitFor((f) => f.type === 'shell_exit' && f.id === 'r-setup')).toMatchObject({
      code: 0,
    })

    for (const bad of MALFORMED) {
      socket.send(bad.text)
      const error = await socket.waitForType('error')
      expect(error.code, bad.name).toBe(bad.code)
      expect(typeof error.message, bad.name).toBe('string')
      expect(socket.open, bad.name).toBe(true)
    }

    socket.send(JSON.stringify({ type: 'shell_run', id: 'r-after', command: 'echo "$E2E_KEEP"' }))
    const out = await socket.waitFor((f) => f.type === 'shell_out' && f.id === 'r-after')
    expect(out.data).toBe('kept\n')
    expect(await socket.waitFor((f) => f.type === 'shell_exit' && f.id === 'r-after')).toMatchObject({
      code: 0,
    })
    expect(socket.open).toBe(true)
  })

  test('answers a binary frame, an oversized frame and an oversized command with error frames', async ({
    runner,
    sandbox,
  }) => {
    await using socket = await RawShellSocket.connect({
      url: runner.url,
      sandboxId: sandbox.id,
      secret: runner.apiKey,
    })
    await socket.waitForType('scrollback_end')
    socket.sendBinary(new Uint8Array([0xff, 0x00, 0x7b]))
    expect((await socket.waitForType('error')).code).toMatch(/INVALID_FRAME|BAD_REQUEST/)
    expect(socket.open).toBe(true)

    // Over the 4 MiB frame limit, under the limit plus the 1 MiB slack past which ws closes.
    const huge = 'x'.repeat(4.5 * 1024 * 1024)
    socket.send(JSON.stringify({ type: 'shell_run', id: 'r-huge', command: `: ${huge}` }))
    expect((await socket.waitForType('error')).code).toBe('FRAME_TOO_LARGE')
    expect(socket.open).toBe(true)

    const long = 'y'.repeat(2 * 1024 * 1024)
    socket.send(JSON.stringify({ type: 'shell_run', id: 'r-long', command: `: ${long}` }))
    expect((await socket.waitForType('error')).code).toBe('COMMAND_TOO_LARGE')
    expect(socket.open).toBe(true)

    socket.send(JSON.stringify({ type: 'shell_run', id: 'r-ok', command: 'echo fine' }))
    expect(await socket.waitFor((f) => f.type === 'shell_exit' && f.id === 'r-ok')).toMatchObject({ code: 0 })
  })

  test('rejects an unknown sandbox id over REST with SANDBOX_NOT_FOUND', async ({ runner }) => {
    const response = await fetch(`${runner.url}/v1/sandboxes/sb_doesnotexist00`, {
      headers: { authorization: `Bearer ${runner.apiKey}` },
    })
    expect(response.status).toBe(404)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('SANDBOX_NOT_FOUND')
  })

  test('rejects a malformed REST body with BAD_REQUEST', async ({ runner, sandbox }) => {
    const response = await fetch(`${runner.url}/v1/sandboxes/${sandbox.id}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${runner.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ command: 42 }),
    })
    expect(response.status).toBe(400)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('BAD_REQUEST')
  })
})
