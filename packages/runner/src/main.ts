#!/usr/bin/env node
// `conch runner`: the process entry. The only place that reads argv and the environment,
// opens the state dir, listens, prints, and handles signals. Agents are detached, so stopping
// the runner leaves every sandbox's shells running for the next start to reconnect to.
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'
import pino from 'pino'
import { buildApp, REDACTED_PATHS } from './app.ts'
import { parseCommand } from './cli-command.ts'
import { cliHelp } from './cli-help.ts'
import { ConfigError } from './config-error.ts'
import { generateApiKey, hashSecret } from './credentials.ts'
import { chooseDrivers, type DriverChoice } from './driver-choice.ts'
import { GvisorDriver } from './drivers/gvisor-driver.ts'
import { LocalDriver } from './drivers/local-driver.ts'
import { NamespaceDriver } from './drivers/namespace-driver.ts'
import { SshDriver } from './drivers/ssh-driver.ts'
import { loadSshHosts } from './drivers/ssh-hosts.ts'
import { EgressCredentials } from './egress-credentials.ts'
import { startEmbeddedRunner } from './embedded-runner.ts'
import { prettyLogStream } from './pretty-log-stream.ts'
import { parseRunnerConfig, type RunnerConfig } from './runner-config.ts'
import { defaultLimits } from './runner-limits.ts'
import { RUNNER_VERSION } from './runner-version.ts'
import { SnapshotStore } from './snapshots/snapshot-store.ts'
import { StateDirError } from './state-dir.ts'
import { lockStateDir } from './state-dir-lock.ts'
import { StateStore } from './state-store.ts'

function fail(message: string, code = 2): never {
  process.stderr.write(`conch: ${message}\n`)
  process.exit(code)
}

/** The egress credentials and upstream CAs named by the config; exits with the reason when unreadable. */
function readEgressFiles(config: RunnerConfig): {
  egressCredentials?: EgressCredentials
  egressUpstreamCa?: string[]
} {
  const read = (path: string, what: string): string => {
    try {
      return readFileSync(path, 'utf8')
    } catch (error) {
      fail(`cannot read the ${what} file ${path}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`)
    }
  }
  const out: { egressCredentials?: EgressCredentials; egressUpstreamCa?: string[] } = {}
  if (config.egressCredentials) {
    try {
      out.egressCredentials = EgressCredentials.parse(read(config.egressCredentials, 'egress credentials'))
    } catch (error) {
      fail((error as Error).message)
    }
  }
  if (config.egressUpstreamCa) {
    const pems = read(config.egressUpstreamCa, 'egress upstream CA').match(
      /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g,
    )
    if (!pems) fail(`${config.egressUpstreamCa} holds no PEM certificate`)
    out.egressUpstreamCa = pems
  }
  return out
}

function apiKeyHashes(config: RunnerConfig, store: StateStore): { hashes: string[]; newKey: string | null } {
  if (config.apiKey) return { hashes: [hashSecret(config.apiKey)], newKey: null }
  const stored = store.apiKeyHashes()
  if (stored.length > 0) return { hashes: stored, newKey: null }
  const key = generateApiKey()
  store.addApiKeyHash(hashSecret(key), Date.now())
  return { hashes: [hashSecret(key)], newKey: key }
}

function howTo(url: string, newKey: string | null, stateDir: string): string {
  const key = newKey
    ? `API key (shown once, stored only as a hash in ${relative(process.cwd(), stateDir) || '.'}); in a second terminal:\n\n    export CONCH_API_KEY=${newKey}\n`
    : 'API key: the one printed on first start, or CONCH_API_KEY.\n'
  return `
${key}
Use it from Node, Bun, Deno or a browser:

    import { Sandbox } from '@conch/sdk'
    const sandbox = await Sandbox.create({ url: '${url}', apiKey: process.env.CONCH_API_KEY })
    const shell = await sandbox.shell()
    console.log((await shell.run('cd /tmp && pwd')).stdout)

Or with curl:

    curl -H "Authorization: Bearer $CONCH_API_KEY" -X POST ${url}/v1/sandboxes
`
}

/** The log's destination: pino JSON lines on stderr, or readable lines when asked or on a terminal. */
function logStream(config: RunnerConfig): pino.DestinationStream {
  const stderr = pino.destination(2)
  const tty = process.stderr.isTTY === true
  const pretty = config.logFormat === 'pretty' || (config.logFormat === 'auto' && tty)
  if (!pretty) return stderr
  return prettyLogStream(stderr, { color: tty && !process.env.NO_COLOR })
}

async function main(argv: string[]): Promise<void> {
  let rest: string[]
  try {
    const command = parseCommand(argv)
    if (command.kind === 'help') {
      process.stdout.write(cliHelp(RUNNER_VERSION))
      return
    }
    if (command.kind === 'version') {
      process.stdout.write(`${RUNNER_VERSION}\n`)
      return
    }
    if (command.kind === 'mcp') return await runMcp(command.args)
    rest = command.args
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message)
    throw error
  }
  let config: RunnerConfig
  let store: StateStore
  let choice: DriverChoice
  try {
    config = parseRunnerConfig(rest, process.env, process.cwd())
    store = StateStore.open(config.stateDir)
    // Requests choose only among the drivers the operator allowed; nothing falls back to no
    // isolation unless the operator asked for it by name.
    const namespace = new NamespaceDriver({ stateDir: config.stateDir })
    const gvisor = new GvisorDriver({ stateDir: config.stateDir })
    const ssh = new SshDriver({ hosts: config.sshHosts ? loadSshHosts(config.sshHosts) : new Map() })
    choice = chooseDrivers({
      driver: config.driver,
      drivers: config.drivers,
      unsafeLocal: config.unsafeLocal,
      root: process.getuid?.() === 0,
      candidates: {
        gvisor: { driver: gvisor, problem: gvisor.problem() },
        namespace: { driver: namespace, problem: namespace.problem() },
        local: { driver: new LocalDriver({ stateDir: config.stateDir }), problem: null },
        ssh: { driver: ssh, problem: ssh.problem() },
      },
    })
  } catch (error) {
    if (error instanceof ConfigError || error instanceof StateDirError) fail(error.message)
    throw error
  }
  let unlock: () => void
  try {
    unlock = lockStateDir(config.stateDir)
  } catch (error) {
    fail((error as Error).message, 1)
  }
  const { hashes, newKey } = apiKeyHashes(config, store)
  const egressFiles = readEgressFiles(config)
  const driver = choice.defaultDriver
  const app = buildApp({
    store,
    apiKeyHashes: hashes,
    drivers: choice.allowed,
    defaultDriver: driver.name,
    corsOrigins: config.corsOrigins,
    network: {
      allowPublicPorts: config.allowPublicPorts,
      previewDomain: config.previewDomain ?? null,
      egressPermit: config.egressPermit,
      ...egressFiles,
    },
    shard: config.shard ?? null,
    limits: config.limits,
    snapshotStore: new SnapshotStore(config.stateDir, defaultLimits(config.limits)),
    warmPool: config.warmPool,
    logger: {
      level: config.logLevel,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      stream: logStream(config),
    },
  })
  for (const warning of choice.warnings) app.log.warn(warning)
  for (const allowed of choice.allowed) {
    const warning = allowed.hostWarning?.()
    if (warning) app.log.warn({ driver: allowed.name }, warning)
  }
  // One short line on what the default driver is; the full description (also on every sandbox)
  // follows at debug.
  const level = driver.isolation === 'none' ? 'warn' : 'info'
  const summary = driver.description.split(':')[0]
  app.log[level](
    { allowedDrivers: choice.allowed.map((d) => d.name) },
    `default driver ${driver.name} (isolation: ${driver.isolation}): ${summary}`,
  )
  app.log.debug({ driver: driver.name }, driver.description)

  let stopping = false
  const stop = (signal: string): void => {
    if (stopping) process.exit(1)
    stopping = true
    app.log.info({ signal }, 'shutting down; agents keep running')
    app
      .close()
      .then(() => {
        store.close()
        unlock()
        process.exit(0)
      })
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
  const url = `http://${host}:${port}`
  process.stdout.write(`conch runner listening on ${url}\n`)
  if (newKey || process.stdout.isTTY) process.stdout.write(`${howTo(url, newKey, config.stateDir)}\n`)
}

/** `conch mcp`: the MCP server, against --url or a runner it starts. */
async function runMcp(args: string[]): Promise<void> {
  const { McpUsageError, runMcpCli } = await import('@conch/mcp')
  try {
    await runMcpCli(args, { startEmbeddedRunner, version: RUNNER_VERSION })
  } catch (error) {
    if (error instanceof McpUsageError) fail(error.message)
    throw error
  }
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error)
  process.exit(1)
})
