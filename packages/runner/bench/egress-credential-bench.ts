// Egress credential benchmark: HTTPS requests through the egress proxy to one loopback server,
// as a plain CONNECT tunnel (the proxy relays TLS bytes) and with an injected credential (the
// proxy terminates TLS with the sandbox's CA and relays each request over its own verified,
// kept-alive connection), in the same run.
//
//   pnpm --filter @conch/runner exec node --conditions=source bench/egress-credential-bench.ts
//
// The proxy is driven over loopback TCP, as the agent's relayed streams are handed to it; the
// link hop costs both paths the same and is measured by port-relay-bench. Each request opens a
// new tunnel and TLS handshake, as curl does. The plain tunnel is the reference; the figure is
// the p50 ratio to it.
import { request } from 'node:http'
import { type AddressInfo, createServer, type Socket } from 'node:net'
import { loadavg } from 'node:os'
import { type TLSSocket, connect as tlsConnect } from 'node:tls'
import pino from 'pino'
import { EgressAllowlist } from '../src/egress-allowlist.ts'
import { EgressCa } from '../src/egress-ca.ts'
import { EgressCredentials } from '../src/egress-credentials.ts'
import { EgressProxy } from '../src/egress-proxy.ts'
import { AddressScreen, tableResolver } from '../src/egress-resolver.ts'
import { httpsHost } from '../test/egress/credential-servers.ts'
import { openTunnel } from '../test/egress/proxy-client.ts'

const ROUNDS = Number(process.env.BENCH_EGRESS_REQUESTS ?? 300)

function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0
}

async function tlsTunnel(proxyPort: number, authority: string, ca: string): Promise<TLSSocket> {
  const tunnel = await openTunnel(proxyPort, authority)
  if (!('socket' in tunnel)) throw new Error(`CONNECT refused: ${tunnel.status} ${tunnel.body}`)
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ socket: tunnel.socket, servername: authority.replace(/:\d+$/, ''), ca }, () =>
      resolve(s),
    )
    s.once('error', reject)
  })
}

function get(tls: TLSSocket, host: string, keepAlive: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        createConnection: () => tls as unknown as Socket,
        path: '/bench',
        headers: { host, connection: keepAlive ? 'keep-alive' : 'close' },
      },
      (res) => {
        res.resume()
        res.on('end', () =>
          res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`)),
        )
      },
    )
    req.on('error', reject)
    req.end()
  })
}

async function main(): Promise<void> {
  const upstreamCa = await EgressCa.create('sb_benchpub')
  const plain = await httpsHost(upstreamCa, 'plain.test')
  const api = await httpsHost(upstreamCa, 'api.test')
  const allowlist = new EgressAllowlist([`plain.test:${plain.port}`, `api.test:${api.port}`])
  const credentials = EgressCredentials.parse(
    JSON.stringify({
      api: { host: 'api.test', headers: { authorization: 'Bearer bench-secret-0123456789' } },
    }),
  )
  const sandboxCa = await EgressCa.create('sb_benchbox')
  const proxy = new EgressProxy({
    resolver: tableResolver({ 'plain.test': ['127.0.0.1'], 'api.test': ['127.0.0.1'] }),
    screen: new AddressScreen(['127.0.0.1/32']),
    logger: pino({ level: 'silent' }),
    upstreamCa: [upstreamCa.certPem],
  })
  const origin = {
    sandboxId: 'sb_benchbox',
    allowlist,
    injection: { credentials: credentials.resolve(['api'], allowlist), ca: sandboxCa },
  }
  const server = createServer((socket) => {
    // A relayed stream has no Nagle delay; a loopback socket must not add one either.
    socket.setNoDelay(true)
    proxy.accept(socket, origin)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const proxyPort = (server.address() as AddressInfo).port
  const targets = {
    tunnel: { authority: `plain.test:${plain.port}`, ca: upstreamCa.certPem },
    injected: { authority: `api.test:${api.port}`, ca: sandboxCa.certPem },
  }
  const perRequest: Record<keyof typeof targets, number[]> = { tunnel: [], injected: [] }
  // Warm both paths (leaf minting, upstream pool), then interleave so load affects both alike.
  for (const t of Object.values(targets))
    for (let i = 0; i < 10; i++) await get(await tlsTunnel(proxyPort, t.authority, t.ca), t.authority, false)
  for (let i = 0; i < ROUNDS; i++) {
    for (const [name, t] of Object.entries(targets) as [keyof typeof targets, (typeof targets)['tunnel']][]) {
      const t0 = performance.now()
      await get(await tlsTunnel(proxyPort, t.authority, t.ca), t.authority, false)
      perRequest[name].push(performance.now() - t0)
    }
  }
  const r = (n: number): number => Math.round(n * 1000) / 1000
  const result = {
    rounds: ROUNDS,
    loadavg: loadavg().map(r),
    newTunnelPerRequest: {
      tunnelP50Ms: r(percentile(perRequest.tunnel, 50)),
      injectedP50Ms: r(percentile(perRequest.injected, 50)),
      ratio: r(percentile(perRequest.injected, 50) / percentile(perRequest.tunnel, 50)),
    },
  }
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
  server.close()
  proxy.close()
  plain.close()
  api.close()
}

await main()
