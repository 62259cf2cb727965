// `conch-router`: the process entry, loaded by bin.ts once the Node version is right. The only
// place that reads argv and the environment, listens, prints and handles signals. The router keeps no state, so stopping it loses nothing:
// clients reconnect (through any router replica) and reattach to their shells.
import pino from 'pino'
import { buildRouter } from './app.ts'
import { ConfigError } from './config-error.ts'
import { REDACTED_PATHS } from './log-redaction.ts'
import { checkPreviewShards } from './preview-host.ts'
import { parseRouterConfig, type RouterConfig, routerConfigUsage } from './router-config.ts'
import { buildShardTable, type ShardTable } from './shard-table.ts'

const USAGE = `usage: conch-router [router] [flags]

Forwards the conch API (REST + WebSocket) to several runners. Every sandbox id names the runner
shard that holds it (runners started with --shard <name>); the router sends each request to that
runner with the client's credentials unchanged, places new sandboxes on the least-loaded ready
runner, and lists sandboxes across all of them. It holds no state and no secret.

Shards are fixed at startup, either listed:
    --shards conch-0=http://10.0.0.5:7878,conch-1=http://10.0.0.6:7878
or as a StatefulSet pattern expanded for n = 0 .. count-1:
    --shard-pattern 'conch-{n}=http://conch-{n}.conch-headless:7878' --shard-count 3

With --preview-domain (the runners' own), a request whose Host is <port>-<sandbox id>.<domain>
goes, Host unchanged, to the shard that id names.

flags (each also settable as an environment variable):
${routerConfigUsage()}
`

function fail(message: string, code = 2): never {
  process.stderr.write(`conch-router: ${message}\n`)
  process.exit(code)
}

async function main(argv: string[]): Promise<void> {
  const args = argv[0] === 'router' ? argv.slice(1) : argv
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(USAGE)
    return
  }
  let config: RouterConfig
  let shards: ShardTable
  try {
    config = parseRouterConfig(args, process.env)
    shards = buildShardTable({
      shards: config.shards,
      pattern: config.shardPattern,
      count: config.shardCount,
    })
    if (config.previewDomain) checkPreviewShards(shards)
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message)
    throw error
  }
  const app = buildRouter({
    shards,
    pollIntervalMs: config.pollIntervalMs,
    connectTimeoutMs: config.connectTimeoutMs,
    maxBodyBytes: config.maxBodyBytes,
    maxHeaderBytes: config.maxHeaderBytes,
    maxFrameBytes: config.maxFrameBytes,
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    keepAliveTimeoutMs: config.keepAliveTimeoutMs,
    maxConnections: config.maxConnections,
    previewDomain: config.previewDomain ?? null,
    logger: {
      level: config.logLevel,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      stream: pino.destination(2),
    },
  })
  let stopping = false
  const stop = (signal: string): void => {
    if (stopping) process.exit(1)
    stopping = true
    app.log.info({ signal }, 'shutting down')
    app
      .close()
      .then(() => process.exit(0))
      .catch((error) => {
        app.log.error({ err: error }, 'shutdown failed')
        process.exit(1)
      })
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  try {
    await app.listen({ host: config.host, port: config.port })
  } catch (error) {
    fail(`could not listen on ${config.host}:${config.port}: ${(error as Error).message}`, 1)
  }
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.port
  const host = config.host.includes(':') ? `[${config.host}]` : config.host
  app.log.info({ shards: [...shards.values()].map((s) => `${s.name}=${s.url.origin}`) }, 'shards')
  console.log(`conch router listening on http://${host}:${port} (${shards.size} shards)`)
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error)
  process.exit(1)
})
