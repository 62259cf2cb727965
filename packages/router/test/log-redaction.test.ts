// The router's own log, from a real router process: a port token in a URL's query (a browser's
// first visit to an exposed port, by path or on a preview host) or any other credential in a
// URL never reaches it.
import { request } from 'node:http'
import { fileURLToPath } from 'node:url'
import { shardedSandboxId } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { spawnListening } from './runner-cluster.ts'

const ROUTER_MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))

describe('the router log', () => {
  it('writes request URLs with credentials cut out', async () => {
    // The shard's runner is not running: the router still logs every request it receives.
    const router = await spawnListening(
      ROUTER_MAIN,
      [
        'router',
        '--port',
        '0',
        '--log-level',
        'info',
        '--shards',
        'conch-0=http://127.0.0.1:9',
        '--preview-domain',
        'preview.test',
      ],
      {},
    )
    try {
      const id = shardedSandboxId('conch-0', 'Abcdefgh12345678')
      const portToken = `cpt_${id}.3000.1795547696589.${'m'.repeat(43)}`
      const sandboxToken = `cst_${'s'.repeat(43)}`
      // A browser's first visit to a preview host.
      await new Promise<void>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port: router.port,
            path: `/?conch_port_token=${portToken}&preview=1`,
            headers: { host: `3000-${id.toLowerCase()}.preview.test` },
          },
          (res) => {
            res.resume()
            res.on('end', resolve)
          },
        )
        req.on('error', reject)
        req.end()
      })
      for (const path of [
        `/v1/sandboxes/${id}/ports/3000/?conch_port_token=${portToken}`,
        `/v1/sandboxes/${id}/ports/3000/app?token=app-secret-1&page=2`,
        `/v1/sandboxes/${id}/ports/3000/${sandboxToken}?mark=end`,
      ])
        await (await fetch(`${router.url}${path}`)).arrayBuffer()
      await vi.waitFor(() => expect(router.log()).toContain('mark=end'))
      const log = router.log()
      for (const secret of [portToken, sandboxToken, 'app-secret-1']) expect(log).not.toContain(secret)
      expect(log).toContain(`/v1/sandboxes/${id}/ports/3000/?conch_port_token=[redacted]`)
      expect(log).toContain('app?token=[redacted]&page=2')
    } finally {
      await router.kill()
    }
  })
})
