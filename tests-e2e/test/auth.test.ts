import { AuthError, Sandbox } from '@conch/sdk'
import { describe, expect, vi } from 'vitest'
import { RawShellSocket } from './raw-shell-socket.ts'
import { connectionOf, createSandbox, test } from './runner-fixture.ts'

describe('auth', () => {
  test('refuses a request without a key', async ({ runner }) => {
    const response = await fetch(`${runner.url}/v1/sandboxes`)
    expect(response.status).toBe(401)
    const body = (await response.json()) as { error?: { code?: string } }
    expect(body.error?.code).toBe('UNAUTHORIZED')

    const socket = RawShellSocket.connect({ url: runner.url, sandboxId: 'sb_doesnotexist', secret: '' })
    await expect(socket).rejects.toThrow(/401/)
  })

  test('refuses a wrong key', async ({ runner }) => {
    const wrong = { url: runner.url, apiKey: `${runner.apiKey.slice(0, -4)}beef` }
    await expect(Sandbox.list(wrong)).rejects.toBeInstanceOf(AuthError)
    await expect(Sandbox.create(wrong)).rejects.toMatchObject({ code: 'UNAUTHORIZED' })
  })

  test('accepts a sandbox token for its own sandbox only', async ({ runner, sandbox }) => {
    await using other = await createSandbox(runner).then((sb) => ({
      sb,
      [Symbol.asyncDispose]: () => sb.destroy(),
    }))
    const { token: secret } = await sandbox.createAccessToken({ ttlMs: 60_000 })

    const own = await Sandbox.connect(sandbox.id, { url: runner.url, token: secret })
    expect((await own.exec('echo scoped')).stdout).toBe('scoped\n')
    await using sh = await own.shell()
    expect((await sh.run('echo over the socket')).stdout).toBe('over the socket\n')

    const error = await Sandbox.connect(other.sb.id, { url: runner.url, token: secret })
      .then((sb) => sb.exec('echo should not run'))
      .then(
        () => null,
        (err: unknown) => err,
      )
    expect(error).toBeInstanceOf(AuthError)

    // Nor may it reach the runner-wide API.
    await expect(Sandbox.list({ url: runner.url, token: secret })).rejects.toBeInstanceOf(AuthError)

    // The browser path: the token as a WebSocket subprotocol, refused for the other sandbox.
    const denied = RawShellSocket.connect({
      url: runner.url,
      sandboxId: other.sb.id,
      secret,
      viaSubprotocol: true,
    })
    await expect(denied).rejects.toThrow(/40[13]/)
    await using allowed = await RawShellSocket.connect({
      url: runner.url,
      sandboxId: sandbox.id,
      secret,
      viaSubprotocol: true,
    })
    expect((await allowed.waitForType('shell_ready')).type).toBe('shell_ready')
  })

  test('refuses an expired token', async ({ runner, sandbox }) => {
    const { token: secret, expiresAt } = await sandbox.createAccessToken({ ttlMs: 1 })
    // Wait until the clock has passed the expiry instant.
    await vi.waitFor(() => expect(Date.now()).toBeGreaterThan(expiresAt), { interval: 1 })
    const error = await Sandbox.connect(sandbox.id, { url: runner.url, token: secret })
      .then((sb) => sb.exec('echo should not run'))
      .then(
        () => null,
        (err: unknown) => err,
      )
    expect(error).toBeInstanceOf(AuthError)
    expect((await Sandbox.connect(sandbox.id, connectionOf(runner))).id).toBe(sandbox.id)
  })
})
