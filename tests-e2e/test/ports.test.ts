import { ConchError } from '@conch/sdk'
import { describe, expect, vi } from 'vitest'
import { test } from './runner-fixture.ts'

describe('ports', () => {
  test('finds a python http.server by its port, exposes it, and a browser-style visit reaches it', async ({
    sandbox,
  }) => {
    await sandbox.files.write('/workspace/site/index.html', '<h1>built by the agent</h1>\n')
    const before = new Set((await sandbox.ports()).map((p) => p.port))
    await sandbox.startProcess('cd site && exec python3 -m http.server 0 --bind 127.0.0.1')
    const port = await vi.waitFor(
      async () => {
        const added = (await sandbox.ports()).find((p) => !before.has(p.port) && p.address === '127.0.0.1')
        if (!added) throw new Error('the server is not listening yet')
        return added.port
      },
      { timeout: 20_000, interval: 100 },
    )
    const { url, token } = await sandbox.exposePort(port)
    expect(url).toContain(`/ports/${port}/?conch_port_token=`)
    // A browser keeps the cookie the first answer sets and follows its redirect.
    const first = await fetch(url, { redirect: 'manual' })
    expect(first.status).toBe(303)
    const cookie = (first.headers.getSetCookie()[0] ?? '').split(';')[0] ?? ''
    const page = await fetch(new URL(first.headers.get('location') ?? '', url), { headers: { cookie } })
    expect(page.status).toBe(200)
    expect(await page.text()).toBe('<h1>built by the agent</h1>\n')
    const without = await fetch(sandbox.portUrl(port, '/'))
    expect(without.status).toBe(401)
    expect(token.startsWith('cpt_')).toBe(true)
  })

  test('refuses port 0 with a typed error', async ({ sandbox }) => {
    const error = await sandbox.exposePort(0).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConchError)
    expect((error as ConchError).code).toBe('BAD_REQUEST')
  })
})
