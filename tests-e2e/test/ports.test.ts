import { ConchError } from '@conch/sdk'
import { describe, expect, vi } from 'vitest'
import { test } from './runner-fixture.ts'

describe('ports', () => {
  test('finds a python http.server by its port, exposes it, and a browser-style visit reaches it', async ({
    sandbox,
  }) => {
    await sandbox.files.write('/workspace/site/index.html', '<h1>built by the agent</h1>\n')
    const proc = await sandbox.startProcess('cd site && exec python3 -u -m http.server 0 --bind 127.0.0.1')
    const port = await vi.waitFor(
      async () => {
        const found = /port (\d+)/.exec((await proc.output()).stdout)
        if (!found?.[1]) throw new Error('the server has not said its port yet')
        return Number(found[1])
      },
      { timeout: 20_000, interval: 100 },
    )
    expect(await sandbox.ports()).toContainEqual({ port, address: '127.0.0.1', family: 'ipv4' })
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

  test('watchPorts reports a server that starts listening, then stops', async ({ sandbox }) => {
    const abort = new AbortController()
    const events = sandbox.watchPorts({ signal: abort.signal })[Symbol.asyncIterator]()
    const proc = await sandbox.startProcess('exec python3 -u -m http.server 0 --bind 127.0.0.1')
    const port = await vi.waitFor(
      async () => {
        const { stdout } = await proc.output()
        const found = /port (\d+)/.exec(stdout)
        if (!found?.[1]) throw new Error('the server has not said its port yet')
        return Number(found[1])
      },
      { timeout: 20_000, interval: 100 },
    )
    const seen: string[] = []
    for (;;) {
      const { value } = await events.next()
      if (value?.port !== port) continue
      seen.push(value.type)
      if (value.type === 'port_opened') await proc.kill('SIGKILL')
      else break
    }
    expect(seen).toEqual(['port_opened', 'port_closed'])
    abort.abort()
    await events.return?.(undefined)
  })

  test('refuses port 0 with a typed error', async ({ sandbox }) => {
    const error = await sandbox.exposePort(0).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConchError)
    expect((error as ConchError).code).toBe('BAD_REQUEST')
  })
})
